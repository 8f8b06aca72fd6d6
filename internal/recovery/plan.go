package recovery

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Refusal is a guard's answer: nothing may be changed, and why.
type Refusal struct {
	// Reason is one of the Planned condition's reasons.
	Reason  string
	Message string
	// Waiting: the guard may pass later on its own, so the recovery stays
	// pending and is planned again, rather than refused for good.
	Waiting bool
	// CheckKeyOf is the encrypted EtcdSnapshot whose key a Job must check
	// before the plan can be made (reason RecoveryKeyChecking); empty
	// otherwise.
	CheckKeyOf string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Message }

func refuse(reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Cluster is what the guards need to know of the EtcdCluster.
type Cluster struct {
	Name string
	// ClusterID is status.clusterID, empty before the cluster formed.
	ClusterID string
	// Memory: storage.medium is Memory.
	Memory bool
	// Paused: replicas is 0.
	Paused bool
	// Members are the EtcdMembers, with what their own endpoints said.
	Members []Member
}

// Snapshot is an EtcdSnapshot as the snapshot guard sees it.
type Snapshot struct {
	Name        string
	ClusterName string
	Succeeded   bool
	CompletedAt time.Time
	Revision    int64
	// StorageRefused says why the operator may not read the snapshot's
	// storage (backup.CredentialsDecision.Refusal); empty when it may.
	StorageRefused string
	// Encrypted: the snapshot's status records an encryption, so the
	// recovery must name the key and have it checked.
	Encrypted bool
}

// Request is one EtcdRecovery's spec, and what the key check found.
type Request struct {
	Source v1alpha1.RecoverySource
	Force  bool
	// KeyCheck is the result of the Job that checked the named key against
	// an encrypted snapshot; nil when none has reported.
	KeyCheck *KeyCheck
}

// Decide applies the guards to a request and, when they pass, returns the
// plan to record before anything changes. The order is the order of what
// a person would want to hear first: that nothing needs recovering, then
// that the source cannot work, then that it would lose more than needed.
func Decide(c Cluster, req Request, snapshots []Snapshot, now time.Time) (*v1alpha1.RecoveryPlan, *Refusal) {
	switch {
	case c.ClusterID == "":
		return nil, refuse(v1alpha1.ClusterNotFormedReason,
			"EtcdCluster %s has not formed yet, so it holds no data to recover; it is still bootstrapping", c.Name)
	case c.Paused:
		return nil, refuse(v1alpha1.ClusterPausedReason,
			"EtcdCluster %s is paused (replicas: 0); its dormant member holds the data and wakes with it when replicas is raised", c.Name)
	}
	loss := Assess(c.Members)
	if loss.QuorumHeld() {
		return nil, refuse(v1alpha1.QuorumReachableReason,
			"%d of %d voters answer with a leader, a quorum: EtcdCluster %s needs no recovery (self-heal replaces broken members while a quorum holds)",
			loss.Healthy, loss.Voters, c.Name)
	}
	if req.Source.Snapshot != nil {
		return planSnapshot(c, loss, req, snapshots, now)
	}
	return planSurvivor(c, loss, req)
}

// planSurvivor picks the survivor and checks it is the right one.
func planSurvivor(c Cluster, loss Loss, req Request) (*v1alpha1.RecoveryPlan, *Refusal) {
	if c.Memory {
		return nil, refuse(v1alpha1.MemoryStorageReason,
			"EtcdCluster %s keeps its data in memory (storage.medium: Memory): a survivor's data is lost with the Pod restart that --force-new-cluster needs; recover from a snapshot (source.snapshot) instead", c.Name)
	}
	if w := waitForNamed(c, loss, req.Source.Survivor.Member); w != nil {
		return nil, w
	}
	if len(loss.Survivors) == 0 {
		return nil, refuse(v1alpha1.NoSurvivorReason,
			"no member of EtcdCluster %s answers on its own endpoint (%s); recover from a snapshot (source.snapshot) instead", c.Name, loss.Describe())
	}
	forced, refused := judgedGone(loss, req)
	if refused != nil {
		return nil, refused
	}
	best := loss.Survivors[0]
	chosen := best
	if name := req.Source.Survivor.Member; name != "" {
		found := false
		for _, s := range loss.Survivors {
			if s.Name == name {
				chosen, found = s, true
			}
		}
		if !found {
			return nil, refuse(v1alpha1.SurvivorNotFoundReason, "%s", notASurvivor(c, loss, name))
		}
		if behind(chosen, best) {
			if !req.Force {
				return nil, refuse(v1alpha1.SurvivorBehindReason,
					"member %s is behind member %s (applied index %d and revision %d against %d and %d): recovering from %s would lose %d revisions that %s has. Name %s, leave survivor.member empty to use the member furthest ahead, or set spec.force to use %s anyway",
					chosen.Name, best.Name, chosen.Status.RaftAppliedIndex, chosen.Status.Revision, best.Status.RaftAppliedIndex, best.Status.Revision,
					chosen.Name, max(best.Status.Revision-chosen.Status.Revision, 0), best.Name, best.Name, chosen.Name)
			}
			forced = append(forced, v1alpha1.SurvivorBehindReason)
		}
	}
	plan := &v1alpha1.RecoveryPlan{
		Source:            v1alpha1.RecoveryFromSurvivor,
		Survivor:          chosen.Name,
		SurvivorID:        etcd.FormatMemberID(chosen.ID),
		Revision:          chosen.Status.Revision,
		BestKnownRevision: best.Status.Revision,
		BestKnownMember:   best.label(),
		RevisionGap:       max(best.Status.Revision-chosen.Status.Revision, 0),
		Survivors:         Reports(loss.Survivors),
		Removed:           others(c.Members, chosen.Name),
		Forced:            forced,
	}
	plan.Keeps, plan.Loses = survivorWords(c, loss, chosen, plan)
	return plan, nil
}

// judgedGone is the guard against two clusters: a member that only does
// not answer may still be running, with others, the cluster a recovery
// replaces. It passes when the quorum is lost for good, or when forced.
func judgedGone(loss Loss, req Request) ([]string, *Refusal) {
	if loss.ForGood() {
		return nil, nil
	}
	if req.Force {
		return []string{v1alpha1.MembersNotJudgedGoneReason}, nil
	}
	return nil, refuse(v1alpha1.MembersNotJudgedGoneReason,
		"%s do not answer, but self-heal has not judged them gone (lost or corrupt data, a lost node): they may only be unreachable, and could still be running the old cluster while a recovery forms a new one. Wait for the EtcdCluster's QuorumLost condition, or set spec.force once you know they are gone",
		strings.Join(loss.Unjudged(), ", "))
}

// waitForNamed holds a recovery from a named voter that answers on
// neither endpoint but that self-heal has not judged gone: it may be
// starting (a Pod re-created on its volume), and only its own answer can
// say whether it is behind another survivor.
func waitForNamed(c Cluster, loss Loss, name string) *Refusal {
	if name == "" {
		return nil
	}
	for _, m := range loss.Missing {
		if m.Name == name && !Gone(m.Verdict) {
			why := ""
			if m.Verdict != "" {
				why = fmt.Sprintf(" (%s: %s)", m.Verdict, m.Detail)
			}
			r := refuse(v1alpha1.SurvivorNotAnsweringReason,
				"member %s of EtcdCluster %s answers neither on its client nor on its metrics endpoint%s, and self-heal has not judged it gone: it may still be starting. The recovery is planned once it answers; the members that answer are %s. Delete this EtcdRecovery to give up",
				name, c.Name, why, names(loss.Survivors))
			r.Waiting = true
			return r
		}
	}
	return nil
}

// notASurvivor says why a named member cannot be the survivor.
func notASurvivor(c Cluster, loss Loss, name string) string {
	for _, m := range c.Members {
		if m.Name != name {
			continue
		}
		switch {
		case !m.Voter:
			return fmt.Sprintf("member %s is not a voter of EtcdCluster %s: a learner's data is an incomplete copy", name, c.Name)
		case m.Verdict != "":
			return fmt.Sprintf("member %s does not answer on its own endpoint (%s: %s); the members that do are %s", name, m.Verdict, m.Detail, names(loss.Survivors))
		}
		return fmt.Sprintf("member %s does not answer on its own endpoint; the members that do are %s", name, names(loss.Survivors))
	}
	return fmt.Sprintf("EtcdCluster %s has no member %s; the members that answer are %s", c.Name, name, names(loss.Survivors))
}

// planSnapshot picks the snapshot and checks its age.
func planSnapshot(c Cluster, loss Loss, req Request, snapshots []Snapshot, now time.Time) (*v1alpha1.RecoveryPlan, *Refusal) {
	forced, refused := judgedGone(loss, req)
	if refused != nil {
		return nil, refused
	}
	src := req.Source.Snapshot
	var chosen *Snapshot
	if src.SnapshotName != "" {
		for i := range snapshots {
			if snapshots[i].Name == src.SnapshotName {
				chosen = &snapshots[i]
			}
		}
		switch {
		case chosen == nil:
			return nil, refuse(v1alpha1.SnapshotNotFoundReason, "EtcdSnapshot %s does not exist in the namespace", src.SnapshotName)
		case chosen.ClusterName != c.Name:
			return nil, refuse(v1alpha1.SnapshotNotFoundReason, "EtcdSnapshot %s is a snapshot of EtcdCluster %s, not of %s", chosen.Name, chosen.ClusterName, c.Name)
		case !chosen.Succeeded:
			return nil, refuse(v1alpha1.SnapshotNotFoundReason, "EtcdSnapshot %s has not succeeded; only a complete, verified snapshot can be restored", chosen.Name)
		}
	} else {
		chosen = Latest(snapshots, c.Name)
		if chosen == nil {
			return nil, refuse(v1alpha1.SnapshotNotFoundReason, "EtcdCluster %s has no successful EtcdSnapshot to recover from", c.Name)
		}
	}
	if chosen.StorageRefused != "" {
		// Checked before anything changes: the restore would be refused
		// only after the members were gone.
		return nil, refuse(v1alpha1.AmbientCredentialsRefusedReason, "EtcdSnapshot %s cannot be restored: %s", chosen.Name, chosen.StorageRefused)
	}
	if chosen.Encrypted {
		// Also before anything changes: the restore would refuse a missing
		// or wrong key only after the members were gone.
		if refused := checkKey(chosen.Name, src.Encryption, req.KeyCheck); refused != nil {
			return nil, refused
		}
	}
	if src.MaxAge != nil {
		if age := now.Sub(chosen.CompletedAt); age > src.MaxAge.Duration {
			if !req.Force {
				return nil, refuse(v1alpha1.SnapshotTooOldReason,
					"EtcdSnapshot %s completed %s ago, longer than maxAge %s: every write since would be lost. Take or pick a newer snapshot, raise maxAge, or set spec.force",
					chosen.Name, age.Round(time.Second), src.MaxAge.Duration)
			}
			forced = append(forced, v1alpha1.SnapshotTooOldReason)
		}
	}
	plan := &v1alpha1.RecoveryPlan{
		Source:    v1alpha1.RecoveryFromSnapshot,
		Snapshot:  chosen.Name,
		Revision:  chosen.Revision,
		Survivors: Reports(loss.Survivors),
		Removed:   others(c.Members, ""),
		Forced:    forced,
	}
	if len(loss.Survivors) > 0 {
		best := loss.Survivors[0]
		plan.BestKnownRevision, plan.BestKnownMember = best.Status.Revision, best.label()
		plan.RevisionGap = max(best.Status.Revision-chosen.Revision, 0)
	}
	plan.Keeps, plan.Loses = snapshotWords(c, chosen, plan)
	return plan, nil
}

// Latest is the cluster's most recently completed successful snapshot.
func Latest(snapshots []Snapshot, cluster string) *Snapshot {
	var out *Snapshot
	for i := range snapshots {
		s := &snapshots[i]
		if s.ClusterName != cluster || !s.Succeeded {
			continue
		}
		if out == nil || s.CompletedAt.After(out.CompletedAt) || (s.CompletedAt.Equal(out.CompletedAt) && s.Revision > out.Revision) {
			out = s
		}
	}
	return out
}

// Reports renders survivors for status.
func Reports(survivors []Member) []v1alpha1.SurvivorReport {
	var out []v1alpha1.SurvivorReport
	for _, s := range survivors {
		out = append(out, v1alpha1.SurvivorReport{
			Name: s.label(), ID: etcd.FormatMemberID(s.ID),
			RaftIndex: int64(s.Status.RaftIndex), RaftAppliedIndex: int64(s.Status.RaftAppliedIndex), Revision: s.Status.Revision,
		})
	}
	return out
}

// others are the EtcdMembers other than keep, sorted.
func others(members []Member, keep string) []string {
	var out []string
	for _, m := range members {
		if m.Name != "" && m.Name != keep {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

func names(ms []Member) string {
	if len(ms) == 0 {
		return "none"
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.label())
	}
	return strings.Join(out, ", ")
}
