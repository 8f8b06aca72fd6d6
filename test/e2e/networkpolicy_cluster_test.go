//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestNetworkPolicyAroundACluster: the policy the operator keeps around a
// cluster, enforced by the local cluster's enforcer. From a Pod in another
// namespace, and from a Pod of the cluster's own namespace that the policy
// does not name, members' client and peer ports are cut off; from the
// namespace the user allowed the client port answers and the peer port does
// not. Under the policy the operator still runs the cluster, a snapshot Job
// still reaches it, and a member that loses its data dir is still replaced
// (its replacement under the same policy). Turning the policy off removes
// it and opens the client port.
func TestNetworkPolicyAroundACluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	allowedNS := env.CreateNamespace(t, "np-allowed")
	otherNS := env.CreateNamespace(t, "np-other")
	b := newBackupEnv(ctx, t, "np")
	g := b.g
	const name = "np"
	g.Expect(b.c.Create(ctx, &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
			NetworkPolicy: v1alpha1.NetworkPolicySpec{AllowedClients: []v1alpha1.NetworkPolicyClient{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: allowedNS}},
			}}},
		},
	})).To(Succeed())
	_, err := framework.WaitForClusterReady(ctx, b.c, b.ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred(), "the operator brings the cluster up under its policy")
	h := &healHarness{t: t, g: g, c: b.c, ns: b.ns, name: name}
	svc, err := env.ClientServiceEndpoint(ctx, b.ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdClient(svc)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cli.Put(ctx, sentinelKey, sentinelValue)
	cli.Close()
	g.Expect(err).NotTo(HaveOccurred(), "the host, the members' node, reaches the client port")

	policy := &networkingv1.NetworkPolicy{}
	g.Expect(b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: v1alpha1.NetworkPolicyName(name)}, policy)).To(Succeed())
	owner := metav1.GetControllerOf(policy)
	g.Expect(owner).NotTo(BeNil())
	g.Expect(owner.Kind).To(Equal("EtcdCluster"))
	g.Expect(owner.Name).To(Equal(name))

	clients := []struct{ ns, name string }{{allowedNS, "allowed"}, {otherNS, "outsider"}, {b.ns, "neighbour"}}
	for _, c := range clients {
		_, err := env.Clientset.CoreV1().Pods(c.ns).Create(ctx, scriptPod(c.name, "", "", "exec sleep 3600"), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, c := range clients {
		_, err := env.WaitForPodReady(ctx, c.ns, c.name, 3*time.Minute)
		g.Expect(err).NotTo(HaveOccurred(), "client %s", c.name)
	}
	// Both ports answer GET /version in plain text; a dropped SYN times out.
	expect := func(ns, pod, addr string, want probeOutcome) {
		t.Helper()
		url := "http://" + addr + "/version"
		g.Expect(waitForProbeURL(ctx, ns, pod, url, want, "")).To(Succeed(), "%s/%s to %s", ns, pod, url)
	}
	members := func(port int) []string {
		t.Helper()
		addrs, err := env.MemberAddresses(ctx, b.ns, name, port)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrs).To(HaveLen(3))
		return addrs
	}
	clientAddrs, peerAddrs := members(v1alpha1.ClientPort), members(v1alpha1.PeerPort)
	t.Log("the allowed namespace reaches every member's client port, and no peer port")
	for _, a := range clientAddrs {
		expect(allowedNS, "allowed", a, probeAnswered)
	}
	expect(allowedNS, "allowed", peerAddrs[0], probeTimedOut)
	t.Log("another namespace, and an unnamed Pod of the cluster's own, reach neither port")
	for _, a := range clientAddrs {
		expect(otherNS, "outsider", a, probeTimedOut)
	}
	expect(otherNS, "outsider", peerAddrs[0], probeTimedOut)
	expect(b.ns, "neighbour", clientAddrs[1], probeTimedOut)
	expect(b.ns, "neighbour", peerAddrs[1], probeTimedOut)

	t.Log("a snapshot Job reaches the cluster")
	snap := b.snapshot(ctx, "np-snap", name, framework.S3Destination(b.prefix))
	g.Expect(snap.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded), "%+v", succeeded(snap))

	t.Log("a member loses its data dir and is replaced under the policy")
	victim := h.pick(ctx, false)
	h.recover(ctx, victim, "DataDirLost", func() error { return env.LoseDataDir(ctx, b.ns, victim.Name) })
	for _, a := range members(v1alpha1.ClientPort) {
		expect(otherNS, "outsider", a, probeTimedOut)
	}

	t.Log("networkPolicy.enabled: false removes the policy and opens the client port")
	g.Expect(h.edit(ctx, func(c *v1alpha1.EtcdCluster) { c.Spec.NetworkPolicy.Enabled = ptr.To(false) })).To(Succeed())
	g.Expect(framework.WaitFor(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: v1alpha1.NetworkPolicyName(name)}, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})).To(Succeed(), "the operator deleted its policy")
	expect(otherNS, "outsider", members(v1alpha1.ClientPort)[0], probeAnswered)
}
