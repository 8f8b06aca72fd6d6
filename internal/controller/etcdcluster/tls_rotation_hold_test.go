package etcdcluster

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func (h *harness) pauseRollout(on bool) {
	h.t.Helper()
	h.editSpec(func(s *v1alpha1.EtcdClusterSpec) { s.Rollout.Paused = on })
}

// passes reconciles n times, a second apart.
func (h *harness) passes(n int) {
	for range n {
		h.reconcile()
		h.now = h.now.Add(time.Second)
	}
}

// onTwoPeerCAs counts the members whose spec names the two-CA peer
// bundle of pass 1.
func (h *harness) onTwoPeerCAs(names []string) int {
	n := 0
	for _, name := range names {
		if len(h.bundle(h.member(name).Spec.TLS.Peer.TrustBundle)) == 2 {
			n++
		}
	}
	return n
}

func (h *harness) expectNoRestartInFlight(names []string, why string) {
	h.t.Helper()
	for _, n := range names {
		h.g.Expect(h.member(n).Status.RolledAt).To(BeNil(), "%s: %s", n, why)
	}
}

// spec.rollout.paused holds a rotation wherever it changes what members
// present or trust: the restarts of passes 1 and 3 between members, and
// the switch of pass 2. Beginning the rotation and dropping the old CA
// only write the CA Secret and the bundle, and go on.
func TestCARotation_PausedHoldsTheRestartsAndTheSwitch(t *testing.T) {
	h := newHarness(t)
	names := h.formedTLS(&v1alpha1.TLSSpec{})
	h.serveFromSecrets()
	h.pauseRollout(true)
	h.annotate(v1alpha1.RotateCAAnnotation, "r1")
	h.passes(5)
	_, next, _ := h.caOf("peer")
	h.g.Expect(next).To(BeTrue(), "the rotation begins while paused")
	h.g.Expect(h.onTwoPeerCAs(names)).To(BeZero(), "no member restarts onto both CAs while paused")
	h.expectNoRestartInFlight(names, "paused")
	for _, c := range []string{v1alpha1.ProgressingCondition, v1alpha1.ReadyCondition} {
		h.g.Expect(h.condition(c).Reason).To(Equal(v1alpha1.RolloutPausedReason), c)
		h.g.Expect(h.condition(c).Message).To(ContainSubstring("pass 1 of 3"), c)
	}

	// Unpaused, a member restarts; paused again, it finishes and no other
	// one starts.
	h.pauseRollout(false)
	h.rollThrough(names, func() bool { return h.onTwoPeerCAs(names) == 1 })
	h.pauseRollout(true)
	h.passes(5)
	h.g.Expect(h.onTwoPeerCAs(names)).To(Equal(1), "held between members")
	h.expectNoRestartInFlight(names, "the member being restarted finished, no other began")

	// Pass 1 done while paused: the switch waits.
	h.pauseRollout(false)
	h.rollThrough(names, func() bool { return h.onTwoPeerCAs(names) == 3 })
	h.pauseRollout(true)
	h.passes(5)
	_, next, prev := h.caOf("peer")
	h.g.Expect(next && !prev).To(BeTrue(), "every member trusts both CAs, and the new one does not sign yet")
	h.expectNoRestartInFlight(names, "pass 1 is done")
	progressing := h.condition(v1alpha1.ProgressingCondition)
	h.g.Expect(progressing.Reason).To(Equal(v1alpha1.RolloutPausedReason))
	h.g.Expect(progressing.Message).To(ContainSubstring("spec.rollout.paused holds the switch"))

	// Unpaused, the switch; paused again, the old CA is dropped once every
	// member serves its new certificates, and the restarts of pass 3 wait.
	h.pauseRollout(false)
	h.passes(1)
	_, _, prev = h.caOf("peer")
	h.g.Expect(prev).To(BeTrue(), "switched once unpaused")
	h.pauseRollout(true)
	h.passes(5)
	_, _, prev = h.caOf("peer")
	h.g.Expect(prev).To(BeFalse(), "the old CA is dropped while paused")
	h.g.Expect(h.rotation("peer")).To(Equal(v1alpha1.CARotationDroppingOldCA))
	h.g.Expect(h.onTwoPeerCAs(names)).To(Equal(3), "no member restarts onto the new CA alone while paused")
	h.expectNoRestartInFlight(names, "paused")
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Reason).To(Equal(v1alpha1.RolloutPausedReason))
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("pass 3 of 3"))

	h.pauseRollout(false)
	h.rollThrough(names, func() bool { return h.rotation("peer") == "" && h.rotation("client") == "" })
	h.passes(1)
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}

// A rotation, asked for or due, waits for another rollout (a version
// upgrade, here held by a pause between members, where no restart is in
// flight) to end, one change at a time.
func TestCARotation_ARequestWaitsForAnotherRollout(t *testing.T) {
	h := newHarness(t)
	h.formedTLS(&v1alpha1.TLSSpec{})
	h.serveFromSecrets()
	h.pauseRollout(true)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	h.passes(1)
	h.annotate(v1alpha1.RotateCAAnnotation, "r1")
	h.passes(3)
	_, next, _ := h.caOf("peer")
	h.g.Expect(next).To(BeFalse(), "the request waits while the version rollout is in progress")
	h.g.Expect(h.cluster().Status.TLS.RotateCARequest).To(BeEmpty(), "not answered yet")

	// The version change is taken back: no rollout left, the request is
	// answered.
	h.drainEvents()
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = v1alpha1.DefaultEtcdVersion })
	h.passes(1)
	_, next, _ = h.caOf("peer")
	h.g.Expect(next).To(BeTrue())
	h.g.Expect(h.cluster().Status.TLS.RotateCARequest).To(Equal("r1"))
	h.g.Expect(strings.Join(h.drainEvents(), "\n")).To(ContainSubstring(`as asked by etcd.quorumctl.io/rotate-ca="r1"`))
}

// An automatic rotation waits for another rollout too, until the CA is too
// close to its end to wait (half the margin it was due at): then it begins,
// and answers a request waiting meanwhile.
func TestCARotation_AnExpiringCAWaitsForAnotherRolloutUntilItCannot(t *testing.T) {
	h := newHarness(t)
	h.formedTLS(&v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{
		CADuration: &metav1.Duration{Duration: 10 * time.Hour}, CertificateDuration: &metav1.Duration{Duration: time.Hour}}})
	h.serveFromSecrets()
	h.pauseRollout(true)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Version = "3.6.17" })
	h.annotate(v1alpha1.RotateCAAnnotation, "r1")
	h.passes(1)

	// Due (less than a fifth of ten hours, 2 h, left), not urgent (1 h).
	h.now = h.now.Add(8*time.Hour + time.Minute)
	res := h.reconcile()
	_, next, _ := h.caOf("peer")
	h.g.Expect(next).To(BeFalse(), "due, but another rollout is in progress")
	h.g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	h.g.Expect(res.RequeueAfter).To(BeNumerically("<=", time.Hour), "the pass comes back by the time it cannot wait")

	h.drainEvents()
	h.now = h.now.Add(time.Hour)
	h.reconcile()
	_, next, _ = h.caOf("peer")
	h.g.Expect(next).To(BeTrue(), "less than an hour left: it begins during the rollout")
	events := strings.Join(h.drainEvents(), "\n")
	h.g.Expect(events).To(ContainSubstring("since it expires"))
	h.g.Expect(events).To(ContainSubstring("too close to its end to wait for the rollout in progress"))
	h.g.Expect(h.cluster().Status.TLS.RotateCARequest).To(Equal("r1"), "the waiting request is answered by the newer CA")
}

// A rotation begun on a Ready cluster is held to the progress deadline, a
// pass at a time, and a stuck pass reports DeadlineExceeded as a stuck
// rollout does: a restart of pass 1 that does not come back, and a member
// that is not seen serving its new certificates in pass 2 (which restarts
// nothing, so the members look like the target meanwhile).
func TestCARotation_AStuckPassReportsDeadlineExceeded(t *testing.T) {
	h := newHarness(t)
	names := h.formedTLS(&v1alpha1.TLSSpec{})
	pin := h.serveFromSecrets()
	h.g.Expect(h.cluster().Status.ProgressDeadline).To(BeNil(), "Ready: no target in flight")
	h.annotate(v1alpha1.RotateCAAnnotation, "r1")
	h.reconcile()
	dl := h.cluster().Status.ProgressDeadline
	h.g.Expect(dl).NotTo(BeNil(), "a rotation is a target with a deadline")
	h.g.Expect(dl.Time).To(Equal(h.now.Add(defaultDeadlineSecs * time.Second).Truncate(time.Second)))

	var down string
	for i := 0; i < 10 && down == ""; i++ {
		h.reconcile()
		for _, n := range names {
			if h.member(n).Status.RolledAt != nil {
				down = n
			}
		}
	}
	h.g.Expect(down).NotTo(BeEmpty(), "pass 1 restarts a member")
	h.setPodReady(down, false)
	h.drainEvents()
	h.now = h.now.Add(11 * time.Minute)
	h.reconcile()
	progressing := h.condition(v1alpha1.ProgressingCondition)
	h.g.Expect(progressing.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(progressing.Reason).To(Equal(v1alpha1.DeadlineExceededReason))
	h.g.Expect(progressing.Message).To(ContainSubstring("pass 1 of 3"))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.CARotatingReason), "Ready says what is still being done")
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring("Warning DeadlineExceeded")))

	// The member comes back; a member that keeps serving its old
	// certificate holds pass 2, which gets a deadline of its own.
	h.setPodReady(down, true)
	pin(names[0], true)
	h.rollThrough(names, func() bool { _, _, prev := h.caOf("peer"); return prev })
	h.passes(1)
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionFalse), "the switch is progress: a fresh deadline")
	h.g.Expect(h.cluster().Status.ProgressDeadline.Time).To(BeTemporally(">", h.now))
	h.now = h.now.Add(11 * time.Minute)
	h.passes(2)
	h.g.Expect(h.rotation("peer")).To(Equal(v1alpha1.CARotationSwitchingCertificates))
	progressing = h.condition(v1alpha1.ProgressingCondition)
	h.g.Expect(progressing.Reason).To(Equal(v1alpha1.DeadlineExceededReason))
	h.g.Expect(progressing.Message).To(ContainSubstring("pass 2 of 3"))

	// Unpinned, the rotation ends, and so does its deadline.
	pin(names[0], false)
	h.rollThrough(names, func() bool { return h.condition(v1alpha1.ReadyCondition).Status == metav1.ConditionTrue })
	h.g.Expect(h.rotation("peer") + h.rotation("client")).To(BeEmpty())
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(h.cluster().Status.ProgressDeadline).To(BeNil(), "cleared in the pass the cluster is Ready again, which may be the last for long")
}

// The keep-old-ca annotation holds a rotation at the end of pass 2, which
// the pause cannot catch (it holds pass 1's restarts too): passes 1 and 2
// run, every member serves the new certificates and trusts both CAs, and
// the old CA is neither dropped nor is any member restarted until the
// annotation goes; the conditions say so.
func TestCARotation_KeepOldCAHoldsTheDrop(t *testing.T) {
	h := newHarness(t)
	names := h.formedTLS(&v1alpha1.TLSSpec{})
	h.serveFromSecrets()
	h.annotate(v1alpha1.KeepOldCAAnnotation, "true")
	h.annotate(v1alpha1.RotateCAAnnotation, "r1")
	h.rollThrough(names, func() bool { _, _, prev := h.caOf("peer"); return prev })
	h.g.Expect(h.onTwoPeerCAs(names)).To(Equal(3), "pass 1 ran under the annotation")
	h.passes(10)
	for _, section := range []string{"peer", "client"} {
		_, next, prev := h.caOf(section)
		h.g.Expect(next).To(BeFalse(), section)
		h.g.Expect(prev).To(BeTrue(), "%s: the old CA is kept", section)
		h.g.Expect(h.rotation(section)).To(Equal(v1alpha1.CARotationSwitchingCertificates), section)
	}
	h.g.Expect(h.onTwoPeerCAs(names)).To(Equal(3), "no member restarts onto the new CA alone")
	h.expectNoRestartInFlight(names, "held")
	for _, c := range []string{v1alpha1.ProgressingCondition, v1alpha1.ReadyCondition} {
		h.g.Expect(h.condition(c).Reason).To(Equal(v1alpha1.RolloutPausedReason), c)
		h.g.Expect(h.condition(c).Message).To(ContainSubstring(v1alpha1.KeepOldCAAnnotation+" holds dropping the old CA"), c)
	}

	h.annotate(v1alpha1.KeepOldCAAnnotation, "")
	h.rollThrough(names, func() bool { return h.rotation("peer") == "" && h.rotation("client") == "" })
	h.passes(1)
	h.g.Expect(h.onTwoPeerCAs(names)).To(BeZero(), "pass 3 ran once the annotation went")
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}
