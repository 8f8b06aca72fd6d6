package etcdsnapshotschedule

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/component/backupjob"
)

// Snapshots taken while ambient credentials were allowed cannot be pruned
// once they are not: no prune Job is created, the EtcdSnapshot is kept and
// the Pruned condition says why.
func TestPruneWithoutSecretIsRefusedWhenAmbientCredentialsAreOff(t *testing.T) {
	h := newHarness(t)
	h.schedule(func(s *v1alpha1.EtcdSnapshotSchedule) { s.Spec.Destination.S3.CredentialsSecretName = "" })
	for i := 1; i <= 3; i++ {
		h.now = t0.Add(time.Duration(i)*time.Minute + time.Second)
		h.reconcile()
		snaps := h.snapshots()
		h.complete(snaps[len(snaps)-1].Name, v1alpha1.SnapshotSucceeded)
	}
	h.reconcile()
	err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: backupjob.PruneJobName(tickName(1))}, &batchv1.Job{})
	h.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no prune Job")
	h.g.Expect(h.snapshots()).To(HaveLen(3))
	c := h.condition(v1alpha1.PrunedCondition)
	h.g.Expect(c.Reason).To(Equal(v1alpha1.PruneFailedReason))
	h.g.Expect(c.Message).To(ContainSubstring(v1alpha1.AmbientCredentialsRefusedReason))

	// Allowed again, the prune Job may use the default chain.
	h.r.Credentials = backup.CredentialsPolicy{AllowAmbient: true}
	h.reconcile()
	job := &batchv1.Job{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: backupjob.PruneJobName(tickName(1))}, job)).To(Succeed())
	h.g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--ambient-credentials"))
}
