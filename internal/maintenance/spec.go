package maintenance

import (
	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// PolicyOf reads an EtcdCluster's spec.maintenance, its defaults applied. A
// schedule that does not parse (CEL catches most mistakes, not a minute of
// 61) switches routine defragmentation off, never NOSPACE recovery; the
// error says why.
func PolicyOf(spec v1alpha1.MaintenanceSpec) (Policy, error) {
	d := spec.Defrag
	w, err := ParseWindow(d.Schedule, d.WindowLength())
	return Policy{
		Defrag:          d.On() && err == nil,
		Rule:            RuleOf(d),
		Window:          w,
		NoSpaceRecovery: spec.NoSpaceRecovery.On(),
	}, err
}

// RuleOf is the defragmentation rule of the spec, its defaults applied.
func RuleOf(d v1alpha1.DefragSpec) Rule {
	return Rule{FreePercent: d.FreePercentOrDefault(), MinReclaim: d.MinReclaimBytes(), QuotaPercent: d.QuotaPercentOrDefault()}
}
