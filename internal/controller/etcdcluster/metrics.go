package etcdcluster

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/metrics"
)

// recordMetrics exports what the pass observed, from the status updateStatus
// just computed and etcd's answers in the scope. It makes no API call.
func recordMetrics(s *scope) {
	c := s.cluster
	o := metrics.ClusterObservation{
		Namespace: c.Namespace,
		Cluster:   c.Name,
		UID:       string(c.UID),
		Desired:   int(c.DesiredReplicas()),
		Ready:     int(c.Status.ReadyMembers),
		// Set by updateStatus before the metrics are recorded.
		QuorumLost: meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.QuorumLostCondition),
	}
	for _, m := range c.Status.Members {
		switch m.Role {
		case v1alpha1.MemberRoleVoter:
			o.Voting++
		case v1alpha1.MemberRoleLearner:
			o.Learners++
		}
	}
	if s.etcd.listed() {
		o.LeaderID = s.quorumView().LeaderID
		o.MemberDBSizes = map[string]int64{}
		for _, m := range s.members {
			em, ok := s.inEtcd(m)
			if !ok {
				continue
			}
			if h, ok := s.etcd.health[em.ID]; ok && h.err == nil {
				o.MemberDBSizes[m.Name] = h.status.DBSize
			}
		}
	}
	if s.etcd.usable() && s.etcd.alarmErr == nil {
		o.Alarms = map[string]int{}
		for _, a := range s.etcd.alarms {
			o.Alarms[a.Type]++
		}
	}
	metrics.ObserveCluster(o)
}
