package etcdcluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// drainEvents returns every Event recorded so far.
func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// kstatusOf is what Flux, Argo CD and Helm 4's --wait make of the cluster:
// kstatus' own computation on the object as the API server would serve it.
func (h *harness) kstatusOf() kstatus.Status {
	h.t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(h.cluster())
	h.g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("EtcdCluster")
	res, err := kstatus.Compute(u)
	h.g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

func TestKstatusIsInProgressUntilReady(t *testing.T) {
	h := newHarness(t)
	h.createCluster(3)
	h.reconcile()
	h.g.Expect(h.kstatusOf()).To(Equal(kstatus.InProgressStatus), "bootstrapping")

	h = newHarness(t)
	h.formed(3, "demo-a")
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.AvailableCondition).Status).To(BeEquivalentTo("True"))
	h.g.Expect(h.kstatusOf()).To(Equal(kstatus.InProgressStatus), "Available with the seed alone is not done")
	h.g.Expect(h.condition(v1alpha1.ReconcilingCondition).Reason).To(Equal(h.condition(v1alpha1.ReadyCondition).Reason))

	h = newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(BeEquivalentTo("True"))
	h.g.Expect(h.kstatusOf()).To(Equal(kstatus.CurrentStatus), "Ready is done for kstatus too")
}

func TestKstatusFailsWhenStalled(t *testing.T) {
	h := newHarness(t)
	h.createCluster(3)
	h.reconcile()
	h.now = h.now.Add(11 * time.Minute)
	h.reconcile()
	h.g.Expect(h.kstatusOf()).To(Equal(kstatus.FailedStatus))
	stalled := h.condition(v1alpha1.StalledCondition)
	h.g.Expect(stalled.Reason).To(Equal(v1alpha1.DeadlineExceededReason))
	h.g.Expect(stalled.Message).To(ContainSubstring("did not form"))
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring("Warning DeadlineExceeded")))
	h.reconcile()
	h.g.Expect(h.drainEvents()).NotTo(ContainElement(ContainSubstring("DeadlineExceeded")), "announced once, not on every pass")
}

func TestDeadlineExceededThenASpecEditResumes(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "demo-a")
	// The second member is created but its Pod never becomes ready.
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(2))
	h.now = h.now.Add(11 * time.Minute)
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Reason).To(Equal(v1alpha1.DeadlineExceededReason))
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(BeEquivalentTo("True"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.ScalingUpReason), "Ready says what the operator is still doing")
	h.g.Expect(h.kstatusOf()).To(Equal(kstatus.FailedStatus))
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring("Warning DeadlineExceeded")))

	h.setReplicas(1)
	h.reconcile()
	cl := h.cluster()
	h.g.Expect(cl.Status.Observed.Replicas).To(BeEquivalentTo(1), "a new spec is adopted")
	h.g.Expect(cl.Status.ProgressDeadline.Time).To(BeTemporally(">", h.now), "with a fresh deadline")
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(BeEquivalentTo("False"))
}
