package preupgrade

import (
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name       string
		target     string
		configured []string
		want       bool
	}{
		{"a minor up", "3.6.16", []string{"3.5.35", "3.5.35", "3.5.35"}, true},
		{"a patch up", "3.5.36", []string{"3.5.35"}, true},
		{"half way up", "3.6.16", []string{"3.6.16", "3.5.35", "3.5.35"}, true},
		{"every member on the target", "3.6.16", []string{"3.6.16", "3.6.16"}, false},
		{"a rollback while mixed", "3.5.35", []string{"3.6.16", "3.5.35"}, false},
		{"a downgrade", "3.5.35", []string{"3.6.16"}, false},
		{"a target that does not parse", "latest", []string{"3.5.35"}, false},
		{"no members", "3.6.16", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Upgrade(tc.target, tc.configured); got != tc.want {
				t.Fatalf("Upgrade(%s, %v) = %v, want %v", tc.target, tc.configured, got, tc.want)
			}
		})
	}
}

func TestName(t *testing.T) {
	if got, want := Name("main", "3.6.16", 4), "main-preupgrade-3-6-16-g4"; got != want {
		t.Fatalf("Name = %q, want %q", got, want)
	}
	long := strings.Repeat("a", 60)
	a, b := Name(long, "3.6.16", 12), Name(long+"b", "3.6.16", 12)
	for _, n := range []string{a, b} {
		if len(n) > maxName {
			t.Fatalf("Name(%d characters) = %q: %d characters, more than a label value takes", len(long), n, len(n))
		}
		if !strings.HasSuffix(n, "-preupgrade-3-6-16-g12") {
			t.Fatalf("Name = %q: the version and generation are cut off", n)
		}
	}
	if a == b {
		t.Fatalf("two long cluster names that share a prefix get the same snapshot name %q", a)
	}
}

func TestDecide(t *testing.T) {
	const (
		target = "3.6.16"
		gen    = int64(5)
		mine   = "main-preupgrade-3-6-16-g5"
	)
	before := []string{"3.5.35", "3.5.35", "3.5.35"}
	rec := func(name string, g int64, p v1alpha1.SnapshotPhase) *v1alpha1.PreUpgradeSnapshotStatus {
		return &v1alpha1.PreUpgradeSnapshotStatus{Version: target, Name: name, Generation: g, Phase: p}
	}
	found := func(p v1alpha1.SnapshotPhase, msg string) *Snapshot {
		return &Snapshot{Owned: true, Phase: p, Reason: "R", Message: msg}
	}
	for _, tc := range []struct {
		name       string
		in         Input
		want       Step
		wantRecord *v1alpha1.PreUpgradeSnapshotStatus
		wantWanted string
		msg        string
	}{
		{name: "not asked for", in: Input{Target: target, Configured: before}, want: Proceed},
		{name: "not an upgrade: a resources change", in: Input{Enabled: true, Target: target, Configured: []string{target, target}}, want: Proceed},
		{name: "not an upgrade: a rollback while mixed", in: Input{Enabled: true, Target: "3.5.35", Configured: []string{target, "3.5.35"},
			Record: rec("x", 3, v1alpha1.SnapshotSucceeded)}, want: Proceed},
		{name: "the upgrade done keeps its record", in: Input{Enabled: true, Target: target, Configured: []string{target}, Record: rec("x", 3, v1alpha1.SnapshotSucceeded)},
			want: Proceed, wantRecord: rec("x", 3, v1alpha1.SnapshotSucceeded)},
		{name: "first pass of an upgrade creates", in: Input{Enabled: true, Target: target, Configured: before},
			want: Create, wantRecord: rec(mine, gen, v1alpha1.SnapshotPending), wantWanted: mine, msg: "creating EtcdSnapshot " + mine},
		{name: "a repeated create finds it made", in: Input{Enabled: true, Target: target, Configured: before, Found: found(v1alpha1.SnapshotPending, "waiting to start")},
			want: Wait, wantRecord: rec(mine, gen, v1alpha1.SnapshotPending), wantWanted: mine, msg: "waiting to start"},
		{name: "another upgrade's record is replaced", in: Input{Enabled: true, Target: target, Configured: before,
			Record: &v1alpha1.PreUpgradeSnapshotStatus{Version: "3.5.35", Name: "old", Generation: 2, Phase: v1alpha1.SnapshotSucceeded}},
			want: Create, wantRecord: rec(mine, gen, v1alpha1.SnapshotPending), wantWanted: mine},
		{name: "not looked at yet: pending", in: Input{Enabled: true, Target: target, Configured: before, Record: rec(mine, gen, v1alpha1.SnapshotPending),
			Found: &Snapshot{Owned: true}},
			want: Wait, wantRecord: rec(mine, gen, v1alpha1.SnapshotPending), wantWanted: mine},
		{name: "running: wait", in: Input{Enabled: true, Target: target, Configured: before, Record: rec(mine, gen, v1alpha1.SnapshotPending),
			Found: found(v1alpha1.SnapshotRunning, "Job x is streaming")},
			want: Wait, wantRecord: rec(mine, gen, v1alpha1.SnapshotRunning), wantWanted: mine, msg: "Job x is streaming"},
		{name: "an edit while it runs waits for the same one", in: Input{Enabled: true, Target: target, Configured: before,
			Record: rec("main-preupgrade-3-6-16-g4", 4, v1alpha1.SnapshotRunning), Found: found(v1alpha1.SnapshotRunning, "")},
			want: Wait, wantRecord: rec("main-preupgrade-3-6-16-g4", 4, v1alpha1.SnapshotRunning), wantWanted: "main-preupgrade-3-6-16-g4"},
		{name: "succeeded: proceed", in: Input{Enabled: true, Target: target, Configured: before, Record: rec(mine, gen, v1alpha1.SnapshotRunning),
			Found: found(v1alpha1.SnapshotSucceeded, "")},
			want: Proceed, wantRecord: rec(mine, gen, v1alpha1.SnapshotSucceeded), wantWanted: mine},
		{name: "succeeded on record: the rest of the upgrade needs no look", in: Input{Enabled: true, Target: target, Configured: []string{target, "3.5.35"},
			Record: rec(mine, gen, v1alpha1.SnapshotSucceeded)},
			want: Proceed, wantRecord: rec(mine, gen, v1alpha1.SnapshotSucceeded), wantWanted: mine},
		{name: "failed in this generation: stop", in: Input{Enabled: true, Target: target, Configured: before, Record: rec(mine, gen, v1alpha1.SnapshotRunning),
			Found: found(v1alpha1.SnapshotFailed, "dial tcp: no such host")},
			want: Failed, wantRecord: rec(mine, gen, v1alpha1.SnapshotFailed), wantWanted: mine, msg: "R: dial tcp: no such host"},
		{name: "failed in an earlier generation: take another", in: Input{Enabled: true, Target: target, Configured: before,
			Record: rec("main-preupgrade-3-6-16-g4", 4, v1alpha1.SnapshotFailed), Found: found(v1alpha1.SnapshotFailed, "")},
			want: Create, wantRecord: rec(mine, gen, v1alpha1.SnapshotPending), wantWanted: "main-preupgrade-3-6-16-g4"},
		{name: "deleted before it ended: made again", in: Input{Enabled: true, Target: target, Configured: before,
			Record: rec("main-preupgrade-3-6-16-g4", 4, v1alpha1.SnapshotRunning)},
			want: Create, wantRecord: rec(mine, gen, v1alpha1.SnapshotPending), wantWanted: "main-preupgrade-3-6-16-g4"},
		{name: "a failed one deleted: taken again under its name", in: Input{Enabled: true, Target: target, Configured: before,
			Record: rec(mine, gen, v1alpha1.SnapshotFailed)},
			want: Create, wantRecord: rec(mine, gen, v1alpha1.SnapshotPending), wantWanted: mine},
		{name: "a name taken by someone else's snapshot", in: Input{Enabled: true, Target: target, Configured: before, Found: &Snapshot{Phase: v1alpha1.SnapshotSucceeded}},
			want: Failed, wantWanted: mine, msg: "does not belong to this cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Cluster = "main"
			if in.Generation == 0 {
				in.Generation = gen
			}
			if got := Want(in); got != tc.wantWanted {
				t.Fatalf("Want = %q, want %q", got, tc.wantWanted)
			}
			d := Decide(in)
			if d.Step != tc.want {
				t.Fatalf("Step = %s (%s), want %s", d.Step, d.Message, tc.want)
			}
			switch {
			case (d.Record == nil) != (tc.wantRecord == nil):
				t.Fatalf("Record = %+v, want %+v", d.Record, tc.wantRecord)
			case d.Record != nil && *d.Record != *tc.wantRecord:
				t.Fatalf("Record = %+v, want %+v", *d.Record, *tc.wantRecord)
			}
			if !strings.Contains(d.Message, tc.msg) {
				t.Fatalf("Message = %q, want it to contain %q", d.Message, tc.msg)
			}
		})
	}
}
