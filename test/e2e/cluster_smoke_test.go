//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/test/e2e/framework"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// TestLocalClusterSmoke proves the local cluster gives the operator what it
// relies on: restricted Pods, PVCs that keep data, per-Pod DNS behind a
// headless Service, ClusterIP routing, logs, exec and garbage collection.
func TestLocalClusterSmoke(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ns := env.CreateNamespace(t, "smoke")
	cs := env.Clientset
	etcdImage := env.Versions.EtcdImage(env.Versions.EtcdDefault)

	_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd"},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{"app": "smoke-etcd"},
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: "peer", Port: 2380}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-client"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "smoke-etcd"},
			Ports:    []corev1.ServicePort{{Name: "client", Port: 2379, TargetPort: intstr.FromInt32(2379)}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	etcdPod := func() *corev1.Pod {
		peer := fmt.Sprintf("http://etcd-0.etcd.%s.svc.%s:2380", ns, localcluster.ClusterDomain)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "etcd-0", Labels: map[string]string{"app": "smoke-etcd"}},
			Spec: corev1.PodSpec{
				Hostname:        "etcd-0",
				Subdomain:       "etcd",
				SecurityContext: framework.RestrictedPodSecurity(),
				Containers: []corev1.Container{{
					Name:            "etcd",
					Image:           etcdImage,
					ImagePullPolicy: corev1.PullNever,
					Command: []string{
						"/usr/local/bin/etcd", "--name=etcd-0", "--data-dir=/var/lib/etcd/data",
						"--listen-client-urls=http://0.0.0.0:2379",
						"--advertise-client-urls=http://etcd-0.etcd." + ns + ".svc:2379",
						"--listen-peer-urls=http://0.0.0.0:2380",
						"--initial-advertise-peer-urls=" + peer,
						"--initial-cluster=etcd-0=" + peer,
						"--listen-metrics-urls=http://0.0.0.0:2381",
					},
					Ports: []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(2381)}},
						PeriodSeconds: 1,
					},
					SecurityContext: framework.RestrictedContainerSecurity(),
					VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
				}}},
			},
		}
	}

	t.Log("PodSecurity enforces the restricted level: a privileged Pod is refused")
	privileged := etcdPod()
	privileged.Name = "privileged"
	privileged.Spec.SecurityContext = nil
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, privileged, metav1.CreateOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden from PodSecurity, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("restricted"))

	t.Log("a one-member etcd on a PVC, in a restricted namespace")
	_, err = cs.CoreV1().Pods(ns).Create(ctx, etcdPod(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "the restricted level must admit the etcd Pod")
	pod, err := env.WaitForPodReady(ctx, ns, "etcd-0", 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	podIP := pod.Status.PodIP

	t.Log("from a second Pod: per-Pod DNS, then a write and a read through the ClusterIP Service")
	fqdn := fmt.Sprintf("etcd-0.etcd.%s.svc.%s", ns, localcluster.ClusterDomain)
	client := fmt.Sprintf("http://etcd-client.%s.svc.%s:2379", ns, localcluster.ClusterDomain)
	runToCompletion(ctx, t, ns, "dns", localcluster.ToolsImage, []string{"nslookup", fqdn})
	logs := env.Kubectl(ctx, "logs", "-n", ns, "dns")
	g.Expect(logs.Err).NotTo(HaveOccurred())
	g.Expect(logs.Stdout).To(ContainSubstring(podIP), "the per-Pod name must resolve to the etcd Pod's address")

	runToCompletion(ctx, t, ns, "writer", etcdImage, []string{"/usr/local/bin/etcdctl", "--endpoints=" + client, "put", "smoke-key", "smoke-value"})
	runToCompletion(ctx, t, ns, "reader", etcdImage, []string{"/usr/local/bin/etcdctl", "--endpoints=" + client, "get", "smoke-key", "--print-value-only"})
	logs = env.Kubectl(ctx, "logs", "-n", ns, "reader")
	g.Expect(logs.Err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(logs.Stdout)).To(Equal("smoke-value"))

	t.Log("kubectl logs and exec reach the kubelet")
	logs = env.Kubectl(ctx, "logs", "-n", ns, "etcd-0")
	g.Expect(logs.Err).NotTo(HaveOccurred())
	g.Expect(logs.Stdout + logs.Stderr).To(ContainSubstring("ready to serve client requests"))
	exec := env.Kubectl(ctx, "exec", "-n", ns, "etcd-0", "--", "/usr/local/bin/etcdctl", "get", "smoke-key", "--print-value-only")
	g.Expect(exec.Err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(exec.Stdout)).To(Equal("smoke-value"))

	t.Log("the data survives Pod deletion and re-creation on the same PVC")
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "etcd-0", metav1.DeleteOptions{})).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "etcd-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})).To(Succeed())
	_, err = cs.CoreV1().Pods(ns).Create(ctx, etcdPod(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = env.WaitForPodReady(ctx, ns, "etcd-0", 3*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	exec = env.Kubectl(ctx, "exec", "-n", ns, "etcd-0", "--", "/usr/local/bin/etcdctl", "get", "smoke-key", "--print-value-only")
	g.Expect(exec.Err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(exec.Stdout)).To(Equal("smoke-value"))

	t.Log("deleting the PVC deletes its provisioned volume")
	claim, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	volume := claim.Spec.VolumeName
	g.Expect(volume).NotTo(BeEmpty())
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "etcd-0", metav1.DeleteOptions{})).To(Succeed())
	g.Expect(cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{})).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})).To(Succeed(), "PersistentVolume %s must go with its claim (reclaim policy Delete)", volume)

	t.Log("deleting an owner garbage-collects its dependents")
	owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cs.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", metav1.DeleteOptions{})).To(Succeed())
	g.Expect(framework.WaitFor(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})).To(Succeed(), "kube-controller-manager's garbage collector must remove the dependent")
}

// runToCompletion runs one restricted container to completion and fails the
// test if it does not succeed.
func runToCompletion(ctx context.Context, t *testing.T, ns, name, image string, command []string) {
	t.Helper()
	_, err := env.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: framework.RestrictedPodSecurity(),
			Containers: []corev1.Container{{
				Name: name, Image: image, ImagePullPolicy: corev1.PullNever, Command: command,
				SecurityContext: framework.RestrictedContainerSecurity(),
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("failed to create pod %s: %v", name, err)
	}
	if err := env.WaitForPodSucceeded(ctx, ns, name, 2*time.Minute); err != nil {
		t.Fatalf("pod %s did not succeed: %v", name, err)
	}
}
