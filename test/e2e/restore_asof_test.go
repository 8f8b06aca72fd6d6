//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// asOfSchedule is the schedule TestRestoreAsOf takes its snapshots with.
// It stays suspended except to take one: resuming it makes its overdue
// tick create a snapshot at once, and it is suspended again as soon as
// that snapshot exists, well before it can end (a schedule waits for its
// running snapshot before the next tick). So each snapshot is taken when
// the test asks, between writes the test has finished.
const asOfSchedule = "asof"

func (b *backupEnv) setSuspended(ctx context.Context, name string, suspend bool) {
	s := &v1alpha1.EtcdSnapshotSchedule{}
	b.g.Expect(b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: name}, s)).To(Succeed())
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Suspend = suspend
	b.g.Expect(b.c.Patch(ctx, s, patch)).To(Succeed())
}

func (b *backupEnv) scheduleSnapshots(ctx context.Context, schedule string) []v1alpha1.EtcdSnapshot {
	var list v1alpha1.EtcdSnapshotList
	b.g.Expect(b.c.List(ctx, &list, client.InNamespace(b.ns), client.MatchingLabels{v1alpha1.ScheduleLabel: schedule})).To(Succeed())
	return list.Items
}

// takeScheduled has the schedule take one snapshot and returns it, ended.
func (b *backupEnv) takeScheduled(ctx context.Context, t *testing.T, schedule string, seen map[string]bool) *v1alpha1.EtcdSnapshot {
	b.setSuspended(ctx, schedule, false)
	name := ""
	b.g.Expect(framework.WaitFor(ctx, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		for _, s := range b.scheduleSnapshots(ctx, schedule) {
			if !seen[s.Name] {
				name = s.Name
				return true, nil
			}
		}
		return false, nil
	})).To(Succeed(), "the resumed schedule creates a snapshot")
	b.setSuspended(ctx, schedule, true)
	seen[name] = true
	s, err := framework.WaitForSnapshot(ctx, b.c, b.ns, name, 5*time.Minute)
	b.g.Expect(err).NotTo(HaveOccurred())
	b.g.Expect(s.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded), "%+v", succeeded(s))
	t.Logf("snapshot %s: revision %d, started %s, completed %s", s.Name, s.Status.Revision,
		s.Status.StartedAt.UTC().Format(time.RFC3339), s.Status.CompletedAt.UTC().Format(time.RFC3339))
	return s
}

// TestRestoreAsOf: a schedule takes three snapshots with keys written
// before each; a cluster restored from the schedule as of the second
// snapshot's completion holds exactly the keys of the first, and its
// status names the first. kubectl etcd restore --as-of the third's
// completion gives the keys of the first two. A time before every
// snapshot is refused, and no member is created.
func TestRestoreAsOf(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b := newBackupEnv(ctx, t, "restore-asof")
	g := b.g
	b.cluster(ctx, "main", 1, "", nil)
	b.ready(ctx, "main")
	cli := b.etcd(ctx, "main")
	defer cli.Close()

	g.Expect(b.c.Create(ctx, &v1alpha1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: asOfSchedule, Namespace: b.ns},
		Spec: v1alpha1.EtcdSnapshotScheduleSpec{ClusterName: "main", Schedule: "@every 15s",
			Destination: framework.S3Destination(b.prefix), Suspend: true},
	})).To(Succeed())

	seen := map[string]bool{}
	var snaps []*v1alpha1.EtcdSnapshot
	var batches []map[string]string
	for i := 1; i <= 3; i++ {
		batches = append(batches, putRandom(ctx, g, cli, fmt.Sprintf("asof/%d", i), 50))
		snaps = append(snaps, b.takeScheduled(ctx, t, asOfSchedule, seen))
	}
	g.Expect(b.scheduleSnapshots(ctx, asOfSchedule)).To(HaveLen(3), "exactly the three snapshots the test asked for")
	first, second := snaps[0], snaps[1]
	before := second.Status.CompletedAt.UTC().Format(time.RFC3339)
	g.Expect(first.Status.CompletedAt.Time.Before(second.Status.CompletedAt.Time)).To(BeTrue(),
		"the first completed before the second (the API keeps seconds)")

	t.Logf("restore as of %s, the second snapshot's completion", before)
	b.cluster(ctx, "restored", 1, "", &v1alpha1.RestoreSpec{
		FromSchedule: &v1alpha1.RestoreFromSchedule{Name: asOfSchedule, Before: before}})
	restored := b.ready(ctx, "restored")
	ch := restored.Status.RestoreChoice
	g.Expect(ch).NotTo(BeNil())
	g.Expect(ch.SnapshotName).To(Equal(first.Name), "the newest snapshot completed before the time is the first")
	g.Expect(ch.SnapshotCompletedAt.Time).To(BeTemporally("==", first.Status.CompletedAt.Time))
	rf := restored.Status.RestoredFrom
	g.Expect(rf).NotTo(BeNil())
	g.Expect(rf.SnapshotName).To(Equal(first.Name))
	g.Expect(rf.SHA256).To(Equal(first.Status.SHA256))
	g.Expect(rf.Revision).To(Equal(first.Status.Revision))

	eps, err := env.MemberEndpoints(ctx, b.ns, "restored")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(eps).To(HaveLen(1))
	got := readAll(ctx, g, eps[0])
	g.Expect(got).To(Equal(batches[0]), "exactly the keys written before the first snapshot, with their values")

	t.Log("kubectl etcd restore as of the third snapshot's completion")
	bin := buildPlugin(ctx, t)
	third := snaps[2]
	asOf := third.Status.CompletedAt.UTC().Format(time.RFC3339)
	out, _, err := runPluginSplit(ctx, t, bin, "restore", "by-plugin", "--schedule", asOfSchedule, "--as-of", asOf, "-n", b.ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("EtcdSnapshot "+second.Name+", completed at "), "the preview")
	g.Expect(out).To(ContainSubstring("The operator chose EtcdSnapshot " + second.Name))
	g.Expect(out).To(ContainSubstring("EtcdCluster by-plugin is Ready with 1 members"), "the source cluster's size")
	byPlugin := &v1alpha1.EtcdCluster{}
	g.Expect(b.c.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: "by-plugin"}, byPlugin)).To(Succeed())
	g.Expect(byPlugin.Spec.Bootstrap.Restore.FromSchedule.Before).To(Equal(asOf))
	g.Expect(byPlugin.Status.RestoreChoice.SnapshotName).To(Equal(second.Name))
	eps, err = env.MemberEndpoints(ctx, b.ns, "by-plugin")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(eps).To(HaveLen(1))
	want := map[string]string{}
	for _, batch := range batches[:2] {
		for k, v := range batch {
			want[k] = v
		}
	}
	g.Expect(readAll(ctx, g, eps[0])).To(Equal(want), "exactly the keys written before the second snapshot")

	t.Log("restore as of a time before every snapshot")
	early := first.Status.StartedAt.Add(-time.Hour).UTC().Format(time.RFC3339)
	b.cluster(ctx, "too-early", 1, "", &v1alpha1.RestoreSpec{
		FromSchedule: &v1alpha1.RestoreFromSchedule{Name: asOfSchedule, Before: early}})
	cl, err := framework.WaitForClusterCondition(ctx, b.c, b.ns, "too-early", v1alpha1.StalledCondition,
		metav1.ConditionTrue, v1alpha1.RestoreNoSnapshotBeforeReason, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	avail := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.AvailableCondition)
	g.Expect(avail.Reason).To(Equal(v1alpha1.RestoreNoSnapshotBeforeReason))
	g.Expect(avail.Message).To(ContainSubstring("completed before " + early))
	g.Expect(cl.Status.RestoreChoice).To(BeNil())
	b.expectNoMembers(ctx, "too-early")
	g.Expect(framework.WaitFor(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		events, err := env.Clientset.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "too-early" && e.Reason == v1alpha1.RestoreNoSnapshotBeforeReason && e.Type == "Warning" {
				return true, nil
			}
		}
		return false, nil
	})).To(Succeed(), "a Warning Event names the refusal")
}
