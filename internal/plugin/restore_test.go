package plugin

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// restoreWorld has cluster "prod" and three snapshots of its schedule
// "nightly", completed at 01:00, 02:00 and 03:00, and one of "hourly".
func restoreWorld(t *testing.T) *world {
	w := newWorld(t)
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: testNS},
		Spec: v1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](5), MemberTemplate: v1alpha1.MemberTemplate{Version: "3.5.21",
			Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("20Gi"))}}}})
	at := func(h int) *metav1.Time { t := metav1.NewTime(time.Date(2026, 12, 7, h, 0, 0, 0, time.UTC)); return &t }
	for i, name := range []string{"nightly-1", "nightly-2", "nightly-3"} {
		w.objs = append(w.objs, &v1alpha1.EtcdSnapshot{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{v1alpha1.ScheduleLabel: "nightly"}},
			Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: "prod"},
			Status:     v1alpha1.EtcdSnapshotStatus{Phase: v1alpha1.SnapshotSucceeded, CompletedAt: at(i + 1)}})
	}
	w.objs = append(w.objs, &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "hourly-1", Namespace: testNS, Labels: map[string]string{v1alpha1.ScheduleLabel: "hourly"}},
		Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: "prod"},
		Status:     v1alpha1.EtcdSnapshotStatus{Phase: v1alpha1.SnapshotSucceeded, CompletedAt: at(0)}})
	return w
}

// captureCreate keeps every EtcdCluster the command creates: the fake
// client is rebuilt for each run, so it cannot be read back afterwards.
func captureCreate(w *world) *[]*v1alpha1.EtcdCluster {
	var got []*v1alpha1.EtcdCluster
	w.funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if cl, ok := obj.(*v1alpha1.EtcdCluster); ok {
			got = append(got, cl.DeepCopy())
		}
		return c.Create(ctx, obj, opts...)
	}
	return &got
}

func TestRestoreCreatesAClusterFromASchedule(t *testing.T) {
	g := NewWithT(t)
	w := restoreWorld(t)
	created := captureCreate(w)
	r := w.run("restore", "prod-back", "--schedule", "nightly", "--as-of", "2026-12-07T02:30:00Z", "--wait=false")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("EtcdSnapshot nightly-2, completed at 2026-12-07T02:00:00Z, is the newest before it"))
	g.Expect(*created).To(HaveLen(1))
	c := (*created)[0]
	g.Expect(c.Name).To(Equal("prod-back"))
	g.Expect(c.Spec.Bootstrap.Restore.FromSchedule).To(Equal(&v1alpha1.RestoreFromSchedule{Name: "nightly", Before: "2026-12-07T02:30:00Z"}),
		"the time as given: the operator chooses, not the plugin")
	g.Expect(c.Spec.Bootstrap.Restore.SnapshotName).To(BeEmpty())
	g.Expect(c.Spec.MemberTemplate.Version).To(Equal("3.5.21"), "the source cluster's version")
	g.Expect(c.Spec.MemberTemplate.Storage.Size.String()).To(Equal("20Gi"))
	g.Expect(*c.Spec.Replicas).To(Equal(int32(5)))

	w = restoreWorld(t)
	created = captureCreate(w)
	r = w.run("restore", "prod-back", "--schedule", "nightly", "--as-of", "2026-12-07T02:30:00Z", "--wait=false", "--replicas", "1", "--version", "3.6.16")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(*(*created)[0].Spec.Replicas).To(Equal(int32(1)))
	g.Expect((*created)[0].Spec.MemberTemplate.Version).To(Equal("3.6.16"))
}

func TestRestoreRefusesWithoutASnapshotBefore(t *testing.T) {
	g := NewWithT(t)
	w := restoreWorld(t)
	created := captureCreate(w)
	r := w.run("restore", "prod-back", "--schedule", "nightly", "--as-of", "2026-12-07T01:00:00Z")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("no successful snapshot of schedule nightly completed before 2026-12-07T01:00:00Z"))
	g.Expect(r.err).To(ContainSubstring("nothing was created"))
	g.Expect(*created).To(BeEmpty())

	r = w.run("restore", "prod-back", "--schedule", "weekly", "--as-of", "2026-12-07T05:00:00Z")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("no successful snapshot of schedule weekly exists yet"))
	g.Expect(*created).To(BeEmpty())
}

func TestRestoreUsage(t *testing.T) {
	g := NewWithT(t)
	w := restoreWorld(t)
	for _, args := range [][]string{
		{"restore", "x", "--schedule", "nightly"},
		{"restore", "x", "--as-of", "2026-12-07T01:00:00Z"},
		{"restore", "x", "--schedule", "nightly", "--as-of", "yesterday"},
		{"restore", "x", "--schedule", "nightly", "--as-of", "2026-12-07 01:00:00"},
		{"restore", "x", "--schedule", "nightly", "--as-of", "2026-12-07T01:00:00Z", "--restore-timeout", "0s"},
		{"restore", "--schedule", "nightly", "--as-of", "2026-12-07T01:00:00Z"},
	} {
		r := w.run(args...)
		g.Expect(r.code).To(Equal(ExitUsage), "%v: %s", args, r.err)
	}
}

// readyOnRead makes every read of the new cluster show what the operator
// would have written by then.
func readyOnRead(w *world, stalled *metav1.Condition) {
	w.funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if cl, ok := obj.(*v1alpha1.EtcdCluster); ok && key.Name == "prod-back" {
			cl.Status.RestoreChoice = &v1alpha1.RestoreChoice{Schedule: "nightly", SnapshotName: "nightly-2",
				SnapshotCompletedAt: metav1.NewTime(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))}
			if stalled != nil {
				meta.SetStatusCondition(&cl.Status.Conditions, *stalled)
				return nil
			}
			cl.Status.ReadyMembers = 5
			cl.Status.RestoredFrom = &v1alpha1.RestoredFrom{SnapshotName: "nightly-2", Location: "s3://b/ns1/prod/nightly-2.db", Revision: 77}
			meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready"})
		}
		return nil
	}
}

func TestRestoreWaitsAndSaysWhatWasChosen(t *testing.T) {
	g := NewWithT(t)
	w := restoreWorld(t)
	readyOnRead(w, nil)
	r := w.run("restore", "prod-back", "--schedule", "nightly", "--as-of", "2026-12-07T02:30:00Z")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("The operator chose EtcdSnapshot nightly-2 (completed at 2026-12-07T02:00:00Z)"))
	g.Expect(r.out).To(ContainSubstring("EtcdCluster prod-back is Ready with 5 members, restored from s3://b/ns1/prod/nightly-2.db at revision 77"))

	w = restoreWorld(t)
	readyOnRead(w, &metav1.Condition{Type: v1alpha1.StalledCondition, Status: metav1.ConditionTrue,
		Reason: v1alpha1.RestoreCredentialsInvalidReason, Message: "the storage refused the credentials"})
	r = w.run("restore", "prod-back", "--schedule", "nightly", "--as-of", "2026-12-07T02:30:00Z")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("refused to restore EtcdCluster prod-back (RestoreCredentialsInvalid): the storage refused the credentials"))
}
