package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
)

const etcdScheduleResource = "etcdsnapshotschedules.etcd.quorumctl.io"

// DefaultRestoreTimeout bounds restore's wait: the snapshot is checked,
// downloaded and restored by the seed, and every other member copies it
// as a learner.
const DefaultRestoreTimeout = 15 * time.Minute

// restoreOptions are restore's flags.
type restoreOptions struct {
	schedule, asOf, version string
	replicas                int
	wait                    bool
	timeout                 time.Duration
}

func validateRestore(o restoreOptions) error {
	switch {
	case o.schedule == "" || o.asOf == "":
		return usagef("restore needs --schedule NAME and --as-of TIME")
	case o.replicas < 0:
		return usagef("restore --replicas must be positive, got %d", o.replicas)
	}
	if _, err := backup.ParseBefore(o.asOf); err != nil {
		return usagef("restore --as-of %q is not an RFC 3339 time, such as 2026-12-07T01:00:00Z", o.asOf)
	}
	return nil
}

// runRestore creates a new EtcdCluster from the newest successful snapshot
// of a schedule that completed before --as-of. It shows the snapshot the
// operator will choose (the same decision, backup.ChooseAsOf, on the same
// EtcdSnapshots), refuses before creating anything when there is none,
// and, with --wait, follows the cluster until it is Ready and says which
// snapshot the operator actually chose: that one, latched in
// status.restoreChoice, is the one restored, whatever this preview said.
func runRestore(ctx context.Context, env *Env, w io.Writer, name string, o restoreOptions) error {
	before, err := backup.ParseBefore(o.asOf)
	if err != nil {
		return usagef("restore --as-of: %v", err)
	}
	var list v1alpha1.EtcdSnapshotList
	if err := env.Kube.List(ctx, &list, client.InNamespace(env.Namespace), client.MatchingLabels{v1alpha1.ScheduleLabel: o.schedule}); err != nil {
		return access{verb: "list", resource: etcdSnapshotResource, namespace: env.Namespace, what: "EtcdSnapshots"}.explain(err)
	}
	entries := make([]backup.Entry, 0, len(list.Items))
	source := ""
	for _, s := range list.Items {
		e := backup.Entry{Name: s.Name, State: backup.Active}
		switch {
		case !s.DeletionTimestamp.IsZero():
		case s.Status.Phase == v1alpha1.SnapshotSucceeded:
			e.State = backup.Succeeded
		case s.Status.Phase == v1alpha1.SnapshotFailed:
			e.State = backup.Failed
		}
		if s.Status.CompletedAt != nil {
			e.Completed = s.Status.CompletedAt.Time
		}
		entries = append(entries, e)
		source = s.Spec.ClusterName
	}
	a := backup.ChooseAsOf(entries, before)
	if !a.Found {
		return &plainError{msg: fmt.Sprintf("%s (in namespace %s); nothing was created", a.Refusal(o.schedule, before), env.Namespace)}
	}
	c := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace},
		Spec: v1alpha1.EtcdClusterSpec{Bootstrap: &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{
			FromSchedule: &v1alpha1.RestoreFromSchedule{Name: o.schedule, Before: o.asOf},
		}}},
	}
	if err := likeSource(ctx, env, c, o.schedule, source); err != nil {
		return err
	}
	if o.version != "" {
		c.Spec.Version = o.version
	}
	if o.replicas > 0 {
		r := int32(o.replicas)
		c.Spec.Replicas = &r
	}
	if err := env.Kube.Create(ctx, c); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return &plainError{msg: fmt.Sprintf("EtcdCluster %s already exists in namespace %s; a restore creates a new cluster, pick another name", name, env.Namespace), err: err}
		}
		if apierrors.IsInvalid(err) {
			return &plainError{msg: fmt.Sprintf("the API server refused EtcdCluster %s: %v", name, err), err: err}
		}
		return access{verb: "create", resource: etcdClusterResource, namespace: env.Namespace, what: "EtcdCluster " + name}.explain(err)
	}
	if _, err := fmt.Fprintf(w, "Created EtcdCluster %s from schedule %s as of %s: EtcdSnapshot %s, completed at %s, is the newest before it.\n",
		name, o.schedule, before.UTC().Format(time.RFC3339), a.Chosen, a.Completed.UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	if !o.wait {
		_, err := fmt.Fprintf(w, "Follow it with: kubectl get etcdcluster %s -w\n", name)
		return err
	}
	return waitRestored(ctx, env, w, client.ObjectKeyFromObject(c), o.timeout)
}

// likeSource gives the new cluster the member template and size of the
// cluster the schedule snapshots, when that cluster still exists: the
// same etcd version (a restore refuses a snapshot from a newer minor) and
// volumes as large as the data came from.
func likeSource(ctx context.Context, env *Env, c *v1alpha1.EtcdCluster, schedule, source string) error {
	if source == "" {
		s := &v1alpha1.EtcdSnapshotSchedule{}
		err := env.Kube.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: schedule}, s)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return access{verb: "get", resource: etcdScheduleResource, namespace: env.Namespace, what: "EtcdSnapshotSchedule " + schedule}.explain(err)
		}
		source = s.Spec.ClusterName
	}
	src := &v1alpha1.EtcdCluster{}
	err := env.Kube.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: source}, src)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return access{verb: "get", resource: etcdClusterResource, namespace: env.Namespace, what: "EtcdCluster " + source}.explain(err)
	}
	c.Spec.MemberTemplate = *src.Spec.MemberTemplate.DeepCopy()
	c.Spec.Replicas = src.Spec.Replicas
	return nil
}

// waitRestored follows the new cluster: the operator's choice, a refusal
// (which ends the command: nothing more happens until the storage
// changes), and Ready.
func waitRestored(ctx context.Context, env *Env, w io.Writer, key client.ObjectKey, timeout time.Duration) error {
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	chosen := false
	var c *v1alpha1.EtcdCluster
	var refusal *metav1.Condition
	err := poll(deadline, func(ctx context.Context) (bool, error) {
		var err error
		if c, err = env.getCluster(ctx, key.Name); err != nil {
			return false, err
		}
		if ch := c.Status.RestoreChoice; ch != nil && !chosen {
			chosen = true
			if _, err := fmt.Fprintf(w, "The operator chose EtcdSnapshot %s (completed at %s).\n",
				ch.SnapshotName, ch.SnapshotCompletedAt.UTC().Format(time.RFC3339)); err != nil {
				return false, err
			}
		}
		if s := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.StalledCondition); s != nil && s.Status == metav1.ConditionTrue {
			refusal = s
			return true, nil
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == c.Generation, nil
	})
	if err != nil {
		return fmt.Errorf("EtcdCluster %s was not Ready within %s (kubectl describe etcdcluster %s says why): %w", key.Name, timeout, key.Name, err)
	}
	if refusal != nil {
		return &plainError{msg: fmt.Sprintf("the operator refused to restore EtcdCluster %s (%s): %s", key.Name, refusal.Reason, refusal.Message)}
	}
	msg := fmt.Sprintf("EtcdCluster %s is Ready with %d members", key.Name, c.Status.ReadyMembers)
	if rf := c.Status.RestoredFrom; rf != nil {
		msg += fmt.Sprintf(", restored from %s at revision %d", rf.Location, rf.Revision)
	}
	_, err = fmt.Fprintln(w, msg+".")
	return err
}
