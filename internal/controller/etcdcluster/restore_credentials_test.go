package etcdcluster

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

func restoreWithoutSecret(bucket string) *v1alpha1.RestoreSpec {
	r := sourceRestore()
	s3 := *r.Source.S3
	s3.Bucket, s3.CredentialsSecretName = bucket, ""
	r.Source.S3 = &s3
	return r
}

// A source without a credentials Secret, where the operator may not use
// ambient credentials for it, is refused before anything reads it: no
// check Job, no seed, a Stalled cluster and one Warning Event.
func TestRestoreWithoutSecretIsRefusedByDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy backup.CredentialsPolicy
	}{
		{"ambient off", backup.CredentialsPolicy{}},
		{"bucket not listed", backup.CredentialsPolicy{AllowAmbient: true, Buckets: []string{"shared"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRestoreHarness(t, restoreWithoutSecret("tenant-b"))
			h.r.Credentials = tc.policy
			h.reconcile()
			h.g.Expect(h.checkJob()).To(BeNil(), "nothing reads the source")
			h.g.Expect(h.seedMembers()).To(BeEmpty())
			for _, c := range []string{v1alpha1.AvailableCondition, v1alpha1.ReadyCondition} {
				h.g.Expect(h.condition(c).Status).To(Equal(metav1.ConditionFalse))
				h.g.Expect(h.condition(c).Reason).To(Equal(v1alpha1.RestoreAmbientCredentialsRefusedReason), c)
				h.g.Expect(h.condition(c).Message).To(ContainSubstring(`"tenant-b"`), c)
			}
			h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
			h.g.Expect(h.events.Events).To(HaveLen(1))
			h.g.Expect(<-h.events.Events).To(And(ContainSubstring("Warning"), ContainSubstring(v1alpha1.RestoreAmbientCredentialsRefusedReason)))
		})
	}
}

// Allowed for the bucket, the check Job may use the default chain.
func TestRestoreWithoutSecretChecksWithAmbientCredentialsWhenAllowed(t *testing.T) {
	h := newRestoreHarness(t, restoreWithoutSecret("shared"))
	h.r.Credentials = backup.CredentialsPolicy{AllowAmbient: true, Buckets: []string{"shared"}}
	h.reconcile()
	j := h.checkJob()
	h.g.Expect(j).NotTo(BeNil())
	h.g.Expect(j.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--ambient-credentials"))
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.RestoreCheckingReason))
}
