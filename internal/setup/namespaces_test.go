package setup

import "testing"

func TestCacheOptions_CachesOnlyLabelledCoreObjects(t *testing.T) {
	opts := CacheOptions(nil)
	if len(opts.ByObject) != 8 {
		t.Fatalf("want label-scoped caches for 8 kinds (Pods, ConfigMaps, Services, Secrets, claims, budgets, Jobs, NetworkPolicies), got %d", len(opts.ByObject))
	}
	for obj, by := range opts.ByObject {
		if by.Label == nil || by.Label.String() != "etcd.quorumctl.io/cluster" {
			t.Errorf("%T: selector %v, want existence of etcd.quorumctl.io/cluster", obj, by.Label)
		}
	}
}
