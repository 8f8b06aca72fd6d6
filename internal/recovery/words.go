package recovery

import (
	"fmt"
	"strings"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// survivorWords says what a recovery from a survivor keeps and loses, in
// the terms a person deciding on it needs.
func survivorWords(c Cluster, loss Loss, chosen Member, plan *v1alpha1.RecoveryPlan) (string, string) {
	keeps := fmt.Sprintf("the data of member %s as of revision %d (raft index %d, applied %d), the cluster ID %s and %s's member ID: clients see the same cluster, with every write %s had applied",
		chosen.Name, chosen.Status.Revision, chosen.Status.RaftIndex, chosen.Status.RaftAppliedIndex, c.ClusterID, chosen.Name, chosen.Name)
	var loses []string
	if len(plan.Removed) > 0 {
		loses = append(loses, fmt.Sprintf("members %s are deleted with their volumes and replaced by fresh members that copy %s's data",
			strings.Join(plan.Removed, ", "), chosen.Name))
	}
	if plan.RevisionGap > 0 {
		loses = append(loses, fmt.Sprintf("the %d revisions after %d that member %s still has", plan.RevisionGap, chosen.Status.Revision, plan.BestKnownMember))
	}
	var gone []string
	for _, m := range loss.Missing {
		gone = append(gone, m.label())
	}
	if len(gone) > 0 {
		loses = append(loses, fmt.Sprintf("any write after revision %d that only %s had: they cannot be asked, so how many is unknown", chosen.Status.Revision, strings.Join(gone, ", ")))
	}
	loses = append(loses, fmt.Sprintf("entries in %s's raft log it had not yet seen committed, which --force-new-cluster drops", chosen.Name))
	return keeps, strings.Join(loses, "; ")
}

// snapshotWords says what a recovery from a snapshot keeps and loses.
func snapshotWords(c Cluster, s *Snapshot, plan *v1alpha1.RecoveryPlan) (string, string) {
	keeps := fmt.Sprintf("the keys of EtcdSnapshot %s, as of revision %d", s.Name, s.Revision)
	loses := []string{
		fmt.Sprintf("every write after revision %d", s.Revision),
		fmt.Sprintf("the cluster's identity: the cluster gets a new cluster ID in place of %s, so clients and watchers must reconnect, and the revision is bumped and history marked compacted so that no watcher is handed a revision it has seen before", c.ClusterID),
	}
	if plan.RevisionGap > 0 {
		loses = append(loses, fmt.Sprintf("%d revisions that member %s still has", plan.RevisionGap, plan.BestKnownMember))
	}
	if len(plan.Removed) > 0 {
		loses = append(loses, fmt.Sprintf("members %s are deleted with their volumes", strings.Join(plan.Removed, ", ")))
	}
	return keeps, strings.Join(loses, "; ")
}
