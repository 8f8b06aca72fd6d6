package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// Faults are injected the way an operator of a real cluster could: through
// ephemeral containers running the tools image next to etcd, with the
// member's data volume mounted. They pass the restricted Pod Security level.

const (
	dataMount = "/var/lib/etcd"
	dataDir   = dataMount + "/data"
)

// RunEphemeral runs script in a new ephemeral container of the Pod and waits
// for it to finish, returning its exit code.
func (e *Env) RunEphemeral(ctx context.Context, ns, podName, script string) (int32, error) {
	name, err := e.addEphemeral(ctx, ns, podName, "", script)
	if err != nil {
		return 0, err
	}
	var code int32
	err = WaitFor(ctx, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == name && s.State.Terminated != nil {
				code = s.State.Terminated.ExitCode
				return true, nil
			}
		}
		return false, nil
	})
	return code, err
}

// addEphemeral adds an ephemeral container running script with the tools
// image and the member's data volume mounted. With target set, it shares
// that container's process namespace.
func (e *Env) addEphemeral(ctx context.Context, ns, podName, target, script string) (string, error) {
	pods := e.Clientset.CoreV1().Pods(ns)
	p, err := pods.Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	name := "fault-" + rand.String(5)
	no := false
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		TargetContainerName: target,
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            name,
			Image:           localcluster.ToolsImage,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"/bin/sh", "-c", script},
			VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: dataMount}},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no,
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		},
	})
	if _, err := pods.UpdateEphemeralContainers(ctx, podName, p, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("failed to add ephemeral container to %s: %w", podName, err)
	}
	return name, nil
}

// WipeDataDir empties a member's data dir and checks that it is empty. The
// check fails closed: a data dir that cannot be listed is not reported empty.
func (e *Env) WipeDataDir(ctx context.Context, ns, podName string) error {
	script := fmt.Sprintf(`set -e
rm -rf %[1]s/member
test -d %[1]s
listing=$(ls -A %[1]s)
test -z "$listing"`, dataDir)
	code, err := e.RunEphemeral(ctx, ns, podName, script)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("wiping %s failed or left files behind (exit %d)", podName, code)
	}
	return nil
}

// CorruptDataDir overwrites part of every WAL segment and of the database
// with random bytes, and checks that it did.
func (e *Env) CorruptDataDir(ctx context.Context, ns, podName string) error {
	script := fmt.Sprintf(`set -e
n=0
for f in %[1]s/member/wal/*.wal %[1]s/member/snap/db; do
  test -f "$f"
  dd if=/dev/urandom of="$f" bs=4096 count=4 seek=1 conv=notrunc 2>/dev/null
  n=$((n+1))
done
test "$n" -ge 2`, dataDir)
	code, err := e.RunEphemeral(ctx, ns, podName, script)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("corrupting %s failed (exit %d)", podName, code)
	}
	return nil
}

// RestartEtcd stops etcd in place; the kubelet restarts the container in
// the same Pod, whose spec cannot change. It waits until the restart shows,
// or the Pod is gone (the operator may replace the member first). A
// container that already exited, as one whose data was corrupted under it
// can, is restarting anyway and is not signalled.
func (e *Env) RestartEtcd(ctx context.Context, ns, podName string) error {
	before, running, err := e.etcdContainer(ctx, ns, podName)
	if err != nil {
		return err
	}
	if running {
		// The ephemeral container shares etcd's process namespace, where
		// etcd is PID 1 and handles SIGTERM; it dies with etcd, so its own
		// exit code says nothing and is not waited for.
		if _, err := e.addEphemeral(ctx, ns, podName, "etcd", "kill -TERM 1; sleep 30"); err != nil {
			return err
		}
	}
	return WaitFor(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		n, _, err := e.etcdContainer(ctx, ns, podName)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && (n > before || !running), err
	})
}

func (e *Env) etcdContainer(ctx context.Context, ns, podName string) (restarts int32, running bool, err error) {
	p, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return 0, false, err
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "etcd" {
			return s.RestartCount, s.State.Running != nil, nil
		}
	}
	return 0, false, fmt.Errorf("pod %s has no etcd container status", podName)
}
