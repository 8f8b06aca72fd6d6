package etcdsnapshot

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

func (h *harness) snapshotWithoutSecret(name, bucket string) {
	s := &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(h.now)},
		Spec: v1alpha1.EtcdSnapshotSpec{ClusterName: "main", Destination: v1alpha1.SnapshotDestination{
			S3: &v1alpha1.S3Destination{Endpoint: "http://s3:7070", Bucket: bucket},
		}},
	}
	h.g.Expect(h.c.Create(context.Background(), s)).To(Succeed())
}

// A destination without a credentials Secret is refused at once, before the
// cluster is waited for, with its reason and a Warning Event, and no Job.
func TestSnapshotWithoutSecretIsRefusedByDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy backup.CredentialsPolicy
		bucket string
	}{
		{"ambient off", backup.CredentialsPolicy{}, "tenant-b"},
		{"bucket not listed", backup.CredentialsPolicy{AllowAmbient: true, Buckets: []string{"shared"}}, "tenant-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.r.Credentials = tc.policy
			h.cluster(false)
			h.snapshotWithoutSecret("nightly", tc.bucket)
			h.g.Expect(h.reconcile("nightly")).To(Equal(ctrl.Result{}))

			s := h.get("nightly")
			h.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
			c := h.condition("nightly")
			h.g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			h.g.Expect(c.Reason).To(Equal(v1alpha1.AmbientCredentialsRefusedReason))
			h.g.Expect(c.Message).To(ContainSubstring(`"tenant-b"`))
			h.g.Expect(h.job()).To(BeNil(), "nothing runs for a refused snapshot")
			h.g.Expect(h.events.Events).To(Receive(HavePrefix(corev1.EventTypeWarning + " " + v1alpha1.AmbientCredentialsRefusedReason)))
		})
	}
}

// Allowed, the Job may use the default chain; with a Secret it never may.
func TestSnapshotJobGetsAmbientCredentialsOnlyWhenAllowed(t *testing.T) {
	h := newHarness(t)
	h.r.Credentials = backup.CredentialsPolicy{AllowAmbient: true, Buckets: []string{"shared"}}
	h.cluster(true)
	h.snapshotWithoutSecret("nightly", "shared")
	h.reconcile("nightly")
	h.g.Expect(h.get("nightly").Status.Phase).To(Equal(v1alpha1.SnapshotRunning))
	j := h.job()
	h.g.Expect(j).NotTo(BeNil())
	h.g.Expect(j.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--ambient-credentials"))
	h.g.Expect(j.Spec.Template.Spec.Containers[0].Env).To(BeEmpty())

	h2 := newHarness(t)
	h2.r.Credentials = backup.CredentialsPolicy{AllowAmbient: true}
	h2.cluster(true)
	h2.snapshot("nightly", 0)
	h2.reconcile("nightly")
	j = h2.job()
	h2.g.Expect(j).NotTo(BeNil())
	h2.g.Expect(j.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--ambient-credentials"))
}
