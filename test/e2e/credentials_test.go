//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// TestBackupAmbientCredentialsRefused: with the operator's defaults (no
// --allow-ambient-s3-credentials), an S3 destination that names no
// credentials Secret is refused with its reason, an Event says so, and
// nothing runs: no Job, no object in the bucket, and a restore from such a
// source creates no member.
func TestBackupAmbientCredentialsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "backup-ambient")
	b.cluster(ctx, "main", 1, "", nil)
	b.ready(ctx, "main")

	dest := framework.S3Destination(b.prefix)
	dest.S3.CredentialsSecretName = ""
	s := b.snapshot(ctx, "snap", "main", dest)
	b.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotFailed))
	b.g.Expect(succeeded(s).Reason).To(Equal(v1alpha1.AmbientCredentialsRefusedReason))
	b.g.Expect(succeeded(s).Message).To(ContainSubstring("--allow-ambient-s3-credentials"))
	b.g.Expect(framework.WaitFor(ctx, time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		events, err := env.Clientset.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == v1alpha1.AmbientCredentialsRefusedReason && e.InvolvedObject.Name == "snap" {
				return true, nil
			}
		}
		return false, nil
	})).To(Succeed(), "a Warning Event with the reason")
	var jobs batchv1.JobList
	b.g.Expect(b.c.List(ctx, &jobs, client.InNamespace(b.ns))).To(Succeed())
	for _, j := range jobs.Items {
		b.g.Expect(strings.HasSuffix(j.Name, "-snapshot")).To(BeFalse(), "no snapshot Job: %s", j.Name)
	}
	keys, err := framework.ObjectKeys(ctx, b.bucket)
	b.g.Expect(err).NotTo(HaveOccurred())
	b.g.Expect(keys).To(BeEmpty())

	b.cluster(ctx, "restored", 1, "", &v1alpha1.RestoreSpec{Source: &v1alpha1.RestoreSource{S3: dest.S3, Key: "x.db"}})
	cl, err := framework.WaitForClusterCondition(ctx, b.c, b.ns, "restored", v1alpha1.AvailableCondition,
		metav1.ConditionFalse, v1alpha1.RestoreAmbientCredentialsRefusedReason, 5*time.Minute)
	b.g.Expect(err).NotTo(HaveOccurred())
	b.g.Expect(cl.Status.RestoredFrom).To(BeNil())
	b.expectNoMembers(ctx, "restored")
	b.g.Expect(b.c.List(ctx, &jobs, client.InNamespace(b.ns))).To(Succeed())
	for _, j := range jobs.Items {
		b.g.Expect(strings.HasSuffix(j.Name, "-restore-check")).To(BeFalse(), "no restore check Job: %s", j.Name)
	}
}
