// Package preupgrade decides, from what one pass observed, whether a version
// upgrade may restart its first member: spec.rollout.snapshotBeforeUpgrade
// asks for a snapshot first, and the upgrade waits for it to succeed. It
// has no I/O; the cluster controller reads the snapshot, creates it, and
// applies the decision (docs/design/0025-snapshot-before-upgrade.md).
package preupgrade

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
)

// maxName bounds a snapshot's name: it is a label value on its Job
// (etcd.quorumctl.io/snapshot), which takes 63 characters at most.
const maxName = 63

// Step is what the rollout does about the snapshot this pass.
type Step string

const (
	// Proceed: no snapshot is asked for, or the upgrade's has succeeded;
	// the rollout goes on as it would without the setting.
	Proceed Step = "Proceed"
	// Create: create the EtcdSnapshot Decision.Record names, and wait.
	Create Step = "Create"
	// Wait: the snapshot is pending or running; nothing is restarted.
	Wait Step = "Wait"
	// Failed: the snapshot failed (or its name is taken by an object the
	// cluster does not own); the upgrade stops until the spec changes.
	Failed Step = "Failed"
)

// Snapshot is what the pass found of the EtcdSnapshot the upgrade waits on.
type Snapshot struct {
	// Owned: the cluster controls it. One it does not own is never
	// counted, whatever it says.
	Owned bool
	Phase v1alpha1.SnapshotPhase
	// Reason and Message are its Succeeded condition's.
	Reason, Message string
}

// Input is what one pass knows.
type Input struct {
	// Cluster is the EtcdCluster's name, which the snapshot's name starts with.
	Cluster string
	// Enabled: spec.rollout.snapshotBeforeUpgrade is set.
	Enabled bool
	// Target is the version the cluster is rolling to (status.observed).
	Target string
	// Configured are the versions the counted members are configured with.
	Configured []string
	// Generation is the cluster's metadata.generation.
	Generation int64
	// Record is status.preUpgradeSnapshot as the pass began.
	Record *v1alpha1.PreUpgradeSnapshotStatus
	// Found is the EtcdSnapshot Want named, nil if there is none.
	Found *Snapshot
}

// Decision is this pass's step and the record to keep in
// status.preUpgradeSnapshot (nil clears it).
type Decision struct {
	Step   Step
	Record *v1alpha1.PreUpgradeSnapshotStatus
	// Message says, for Wait and Failed, what the upgrade waits on.
	Message string
}

// Upgrade reports whether moving the members configured with configured to
// target is a version upgrade: some member goes to a newer etcd. A rollback
// (the target set back to the version the members ran), a change of
// anything but the version, and versions that do not parse (the version
// check refuses those) are not.
func Upgrade(target string, configured []string) bool {
	t, err := etcdversion.Parse(target)
	if err != nil {
		return false
	}
	for _, c := range configured {
		v, err := etcdversion.Parse(c)
		if err == nil && v.Compare(t) < 0 {
			return true
		}
	}
	return false
}

// Name is the EtcdSnapshot taken before the upgrade to target asked for in
// the cluster's generation: the same in every pass that asks, so a pass
// that repeats a create (its status write lost, a stale cache) finds the
// snapshot made instead of making a second.
func Name(cluster, target string, generation int64) string {
	suffix := fmt.Sprintf("-preupgrade-%s-g%d", strings.ReplaceAll(target, ".", "-"), generation)
	if len(cluster)+len(suffix) <= maxName {
		return cluster + suffix
	}
	// A long cluster name is cut and made unique again by its hash.
	sum := sha256.Sum256([]byte(cluster))
	h := hex.EncodeToString(sum[:])[:8]
	keep := strings.TrimRight(cluster[:maxName-len(suffix)-len(h)-1], "-.")
	return keep + "-" + h + suffix
}

// Want is the EtcdSnapshot the pass must look up, or "" when no snapshot is
// asked for: the one on record for this upgrade, else the one this
// generation would create.
func Want(in Input) string {
	if !in.Enabled || !Upgrade(in.Target, in.Configured) {
		return ""
	}
	if r := in.Record; r != nil && r.Version == in.Target {
		return r.Name
	}
	return Name(in.Cluster, in.Target, in.Generation)
}

// Decide is the step of this pass.
//
// The record ties the upgrade to its snapshot across passes: once the
// snapshot of an upgrade has succeeded, later passes of the same upgrade
// proceed (the members it restarted are no reason to take another), while a
// new target, or a rollback and the same upgrade again, gets a snapshot of
// its own. A snapshot that is still pending is waited for, whatever edit
// came meanwhile: asking for a second would only queue it behind the first.
// A failed one stops the upgrade until the generation moves past it.
func Decide(in Input) Decision {
	rec := in.Record
	if rec != nil && rec.Version != in.Target {
		// Another upgrade's, or one set back before it finished.
		rec = nil
	}
	if !in.Enabled || !Upgrade(in.Target, in.Configured) {
		// Nothing to wait for; an upgrade's record stays with it.
		return Decision{Step: Proceed, Record: rec}
	}
	if rec != nil && rec.Phase == v1alpha1.SnapshotSucceeded {
		return Decision{Step: Proceed, Record: rec}
	}
	name := Want(in)
	fresh := func() Decision {
		n := Name(in.Cluster, in.Target, in.Generation)
		return Decision{Step: Create, Record: &v1alpha1.PreUpgradeSnapshotStatus{
			Version: in.Target, Name: n, Generation: in.Generation, Phase: v1alpha1.SnapshotPending,
		}, Message: fmt.Sprintf("creating EtcdSnapshot %s before the upgrade to etcd %s", n, in.Target)}
	}
	f := in.Found
	switch {
	case f == nil:
		// Never made, or deleted before it ended: make it (again).
		return fresh()
	case !f.Owned:
		return Decision{Step: Failed, Record: rec, Message: fmt.Sprintf(
			"EtcdSnapshot %s exists and does not belong to this cluster; delete or rename it, or edit the spec to take another", name)}
	}
	kept := &v1alpha1.PreUpgradeSnapshotStatus{Version: in.Target, Name: name, Generation: in.Generation, Phase: f.Phase}
	if kept.Phase == "" {
		// Not yet looked at by the snapshot controller.
		kept.Phase = v1alpha1.SnapshotPending
	}
	if rec != nil {
		kept.Generation = rec.Generation
	}
	switch f.Phase {
	case v1alpha1.SnapshotSucceeded:
		return Decision{Step: Proceed, Record: kept}
	case v1alpha1.SnapshotFailed:
		if kept.Generation < in.Generation {
			return fresh()
		}
		return Decision{Step: Failed, Record: kept, Message: fmt.Sprintf(
			"the snapshot before the upgrade to etcd %s failed (EtcdSnapshot %s, %s: %s); no member was restarted. Fix spec.rollout.snapshotBeforeUpgrade or set spec.version back: the next edit of the spec takes a new snapshot",
			in.Target, name, f.Reason, f.Message)}
	}
	msg := fmt.Sprintf("waiting for EtcdSnapshot %s before the upgrade to etcd %s", name, in.Target)
	if f.Message != "" {
		msg += ": " + f.Message
	}
	return Decision{Step: Wait, Record: kept, Message: msg}
}
