package etcdcluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// formedTLS builds a formed 3-member cluster with operator-managed TLS: the
// controller creates the CAs, bundles and the seed, and the other two are
// made like it, as a scale-up would have.
func (h *harness) formedTLS(spec *v1alpha1.TLSSpec) []string {
	h.t.Helper()
	h.createTLSCluster(3, spec)
	h.reconcile()
	seed := h.seed()
	names := []string{seed.Name, "demo-b", "demo-c"}
	for i, n := range names {
		m := seed
		if i > 0 {
			m = seed.DeepCopy()
			m.ObjectMeta = metav1.ObjectMeta{Name: n, Namespace: testNS, Labels: v1alpha1.ClusterLabels(testName)}
			m.Spec.Bootstrap = false
			m.Spec.PeerURL, m.Spec.ClientURL = withScheme(peerURL(n), "https"), withScheme(clientURL(n), "https")
			m.Spec.InitialCluster = n + "=" + m.Spec.PeerURL
			m.Status = v1alpha1.EtcdMemberStatus{}
			h.g.Expect(controllerutil.SetControllerReference(h.cluster(), m, h.c.Scheme())).To(Succeed())
			h.g.Expect(h.c.Create(context.Background(), m)).To(Succeed())
		}
		h.readyPod(n)
		h.labelVoter(n)
		em := h.etcd.AddVoter(n, m.Spec.PeerURL, m.Spec.ClientURL)
		h.setMemberStatus(m, em.IDString(), v1alpha1.MemberRoleVoter)
	}
	cl := h.cluster()
	cl.Status.ClusterID = fmt.Sprintf("%016x", etcdfake.DefaultClusterID)
	cl.Status.ClusterToken = "tok"
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	for range 3 {
		h.reconcile()
	}
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), h.condition(v1alpha1.ReadyCondition).Message)
	return names
}

// serveFromSecrets makes every member serve the certificates its Secret
// holds, as the kubelet brings them into the Pod; the returned pin keeps a
// member serving what its Secret holds now, as a kubelet that is slow to
// sync, until unpinned.
func (h *harness) serveFromSecrets() (pin func(name string, on bool)) {
	pinned := map[string]*x509.Certificate{}
	h.r.ServedCertificate = func(_ context.Context, endpoint string) (*x509.Certificate, error) {
		if c := pinned[endpoint]; c != nil {
			return c, nil
		}
		for _, m := range h.members() {
			switch endpoint {
			case m.Spec.ClientURL:
				return h.leaf(m.Name, "client").Cert, nil
			case m.Spec.PeerURL:
				return h.leaf(m.Name, "peer").Cert, nil
			}
		}
		return nil, fmt.Errorf("no member at %s", endpoint)
	}
	return func(name string, on bool) {
		m := h.member(name)
		pinned[m.Spec.ClientURL], pinned[m.Spec.PeerURL] = nil, nil
		if on {
			pinned[m.Spec.ClientURL], pinned[m.Spec.PeerURL] = h.leaf(name, "client").Cert, h.leaf(name, "peer").Cert
		}
	}
}

func (h *harness) annotate(key, value string) {
	h.t.Helper()
	cl := h.cluster()
	if cl.Annotations == nil {
		cl.Annotations = map[string]string{}
	}
	cl.Annotations[key] = value
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
}

func (h *harness) caOf(section string) (signing *x509.Certificate, next, previous bool) {
	s := h.secret(v1alpha1.CASecretName(testName, section))
	ca, err := certs.ParseCertificates(s.Data["tls.crt"])
	h.g.Expect(err).NotTo(HaveOccurred())
	return ca[0], len(s.Data[nextCertKey]) > 0, len(s.Data[previousCertKey]) > 0
}

// rollThrough runs passes, playing each restart the rollout makes (the Pod
// goes down and comes back), until stop says so. It returns the members
// restarted, in order, and fails if two were ever down at once.
func (h *harness) rollThrough(names []string, stop func() bool) []string {
	h.t.Helper()
	var restarted []string
	for i := 0; i < 60 && !stop(); i++ {
		before := map[string]*v1alpha1.EtcdMember{}
		for _, n := range names {
			before[n] = h.member(n)
		}
		h.reconcile()
		for _, n := range names {
			m := h.member(n)
			if m.Status.RolledAt == nil || before[n].Status.RolledAt != nil {
				continue
			}
			restarted = append(restarted, n)
			h.g.Expect(m.Spec.TLS).NotTo(Equal(before[n].Spec.TLS), "%s restarts for its trust bundles", n)
			h.setPodReady(n, false)
			h.reconcile()
			for _, o := range names {
				if o != n {
					h.g.Expect(h.member(o).Status.RolledAt).To(BeNil(), "nothing else restarts while %s is down", n)
				}
			}
			h.setPodReady(n, true)
		}
		h.now = h.now.Add(time.Second)
	}
	h.g.Expect(stop()).To(BeTrue(), "the rotation moved on")
	return restarted
}

func (h *harness) rotation(section string) string {
	st := h.cluster().Status.TLS
	if section == "peer" {
		return st.Peer.Rotation
	}
	return st.Client.Rotation
}

// The three passes of a requested rotation, through the rollout: members
// restart one at a time to trust both CAs, certificates switch without a
// restart once all do (and only once every member serves them), then
// members restart again to trust the new CA alone.
func TestCARotation_ThreePassesThroughTheRollout(t *testing.T) {
	h := newHarness(t)
	names := h.formedTLS(&v1alpha1.TLSSpec{})
	pin := h.serveFromSecrets()
	oldPeer, _, _ := h.caOf("peer")
	oldClient, _, _ := h.caOf("client")
	h.drainEvents()

	h.annotate(v1alpha1.RotateCAAnnotation, "r1")
	h.reconcile()
	_, next, _ := h.caOf("peer")
	h.g.Expect(next).To(BeTrue(), "a new peer CA is kept beside the old")
	_, next, _ = h.caOf("client")
	h.g.Expect(next).To(BeTrue(), "and a new client CA")
	h.g.Expect(h.cluster().Status.TLS.RotateCARequest).To(Equal("r1"))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("CARotationStarted"))

	// Pass 1.
	h.g.Expect(h.rotation("peer")).To(Equal(v1alpha1.CARotationTrustingNewCA))
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.CARotatingReason))
	h.g.Expect(ready.Message).To(ContainSubstring("pass 1 of 3"))
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.CheckSignatureFrom(oldPeer)).To(Succeed(), "%s keeps its certificate while not all trust the new CA", n)
	}
	pin(names[2], true)
	first := h.rollThrough(names, func() bool { _, _, prev := h.caOf("peer"); return prev })
	h.g.Expect(first).To(ConsistOf(names), "each member restarted once to trust both CAs")
	for _, n := range names {
		trust := h.bundle(h.member(n).Spec.TLS.Peer.TrustBundle)
		h.g.Expect(trust.Contains(oldPeer)).To(BeTrue())
		h.g.Expect(trust).To(HaveLen(2), "%s trusts the old and the new peer CA", n)
	}

	// Pass 2: certificates switch in place, and the old CA stays while a
	// member is still seen serving an old one.
	newPeer, _, _ := h.caOf("peer")
	h.g.Expect(newPeer.Equal(oldPeer)).To(BeFalse())
	for range 3 {
		h.reconcile()
	}
	for _, n := range names {
		h.g.Expect(h.leaf(n, "peer").Cert.CheckSignatureFrom(newPeer)).To(Succeed(), "%s's peer certificate comes from the new CA", n)
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil(), "without a restart")
	}
	_, _, prev := h.caOf("peer")
	h.g.Expect(prev).To(BeTrue(), "a member still serves its old certificate: the old CA stays trusted")
	h.g.Expect(h.rotation("peer")).To(Equal(v1alpha1.CARotationSwitchingCertificates))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Message).To(ContainSubstring("pass 2 of 3"))
	op := h.secret(v1alpha1.OperatorClientSecretName(testName))
	kp, err := certs.ParseKeyPair(op.Data["tls.crt"], op.Data["tls.key"])
	h.g.Expect(err).NotTo(HaveOccurred())
	newClient, _, _ := h.caOf("client")
	h.g.Expect(kp.Cert.CheckSignatureFrom(newClient)).To(Succeed(), "the operator's own certificate switched too")

	// Pass 3.
	pin(names[2], false)
	second := h.rollThrough(names, func() bool {
		_, _, p1 := h.caOf("peer")
		_, _, p2 := h.caOf("client")
		return !p1 && !p2 && h.rotation("peer") == "" && h.rotation("client") == ""
	})
	h.g.Expect(second).To(ConsistOf(names), "each member restarted once more, to trust the new CA alone")
	for _, n := range names {
		m := h.member(n)
		h.g.Expect(h.bundle(m.Spec.TLS.Peer.TrustBundle)).To(HaveLen(1))
		h.g.Expect(h.bundle(m.Spec.TLS.Peer.TrustBundle).Contains(newPeer)).To(BeTrue())
		h.g.Expect(h.bundle(m.Spec.TLS.Client.TrustBundle).Contains(oldClient)).To(BeFalse())
	}
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	events := strings.Join(h.drainEvents(), "\n")
	for _, e := range []string{"CARotationSwitching", "CARotationDroppingOldCA", "CARotationCompleted"} {
		h.g.Expect(events).To(ContainSubstring(e))
	}

	// The request was answered: the annotation may stay.
	for range 3 {
		h.reconcile()
	}
	_, next, _ = h.caOf("peer")
	h.g.Expect(next).To(BeFalse(), "the same request rotates nothing again")
}

// A CA nearing its end is rotated without being asked.
func TestCARotation_BeginsWhenTheCANearsItsEnd(t *testing.T) {
	h := newHarness(t)
	h.formedTLS(&v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{
		CADuration: &metav1.Duration{Duration: 10 * time.Hour}, CertificateDuration: &metav1.Duration{Duration: time.Hour}}})
	h.serveFromSecrets()
	res := h.reconcile()
	_, next, _ := h.caOf("peer")
	h.g.Expect(next).To(BeFalse())
	h.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))

	// A fifth of ten hours (2 h) is longer than a leaf's hour.
	h.now = h.now.Add(8*time.Hour + time.Minute)
	h.reconcile()
	_, next, _ = h.caOf("peer")
	h.g.Expect(next).To(BeTrue(), "less than a fifth of its life left: rotated")
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring("since it expires"))
}

// The rotation's state is in the CA's Secret: a restarted operator goes on
// where the last one stopped, and does not begin anew.
func TestCARotation_SurvivesAnOperatorRestart(t *testing.T) {
	h := newHarness(t)
	names := h.formedTLS(&v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{Mutual: ptr.To(true)}})
	h.serveFromSecrets()
	h.annotate(v1alpha1.RotateCAAnnotation, "r1")
	h.reconcile()
	s := h.secret(v1alpha1.CASecretName(testName, "peer"))
	nextPEM := string(s.Data[nextCertKey])
	h.restartOperator()
	h.serveFromSecrets()
	h.reconcile()
	h.g.Expect(string(h.secret(v1alpha1.CASecretName(testName, "peer")).Data[nextCertKey])).To(Equal(nextPEM), "the same new CA")
	h.rollThrough(names, func() bool { _, _, prev := h.caOf("peer"); return prev })
}

// A restart an operator from before trust bundles were hashed approved, of
// a TLS member, ends when the member is back: the member controller has
// rewritten the Pod's hash in today's form, which is no other template.
func TestCARotation_ARestartApprovedByAnOlderOperatorEnds(t *testing.T) {
	h := newHarness(t)
	names := h.formedTLS(&v1alpha1.TLSSpec{})
	m := h.member(names[1])
	legacy := templateOnlyHash(m)
	h.g.Expect(legacy).NotTo(Equal(pod.TemplateHash(m)))
	now := metav1.NewTime(h.now)
	m.Status.RolledAt, m.Status.RestartApproved = &now, legacy
	h.g.Expect(h.c.Status().Update(context.Background(), m)).To(Succeed())
	p := h.pod(names[1])
	p.Annotations = map[string]string{pod.TemplateHashAnnotation: pod.TemplateHash(m)}
	h.g.Expect(h.c.Update(context.Background(), p)).To(Succeed())
	h.reconcile()
	h.g.Expect(h.member(names[1]).Status.RolledAt).To(BeNil(), "back on its template: the rollout is not held")
}

// templateOnlyHash is the hash operators before trust bundles were hashed
// gave a Pod, written out so that the test does not depend on the code it
// checks.
func templateOnlyHash(m *v1alpha1.EtcdMember) string {
	data, err := json.Marshal(struct {
		Template v1alpha1.MemberTemplate `json:"template"`
	}{m.Spec.MemberTemplate})
	if err != nil {
		panic(err)
	}
	f := fnv.New64a()
	_, _ = f.Write(data)
	return fmt.Sprintf("%016x", f.Sum64())
}
