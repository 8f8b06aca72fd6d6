package crdtest

import (
	"path/filepath"
	"testing"
)

// The chart's CRD carries the temporary rule exactly once, and Load takes
// exactly it out. When the rule is deleted on purpose, delete this test
// with it.
func TestTheTemporaryTLSRuleIsThereOnceAndStrippable(t *testing.T) {
	dir := filepath.Join("..", "..", "charts", "etcd-operator", "crds")
	_, removed, err := Load(dir, TLSNotSupportedYet)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 1 {
		t.Fatalf("removed %d rules with message %q, want exactly 1", removed, TLSNotSupportedYet)
	}
	_, none, err := Load(dir)
	if err != nil || none != 0 {
		t.Fatalf("Load without rules to drop removed %d (%v)", none, err)
	}
}
