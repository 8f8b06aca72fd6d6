// Package memberstatus writes EtcdMember status with server-side apply,
// one field manager per concern, so that every status field has exactly one
// writer and the API server, not convention, holds the controllers to it.
//
// An apply carries only its concern's fields. What it leaves out is removed
// only if its own manager owned it, so a writer whose cache is behind can
// neither set back nor clear another concern's field, and clearing a field
// of its own is leaving it out. docs/design/0030-one-writer-per-field.md
// says why the concerns are cut where they are.
package memberstatus

import (
	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Concern is one writer's share of EtcdMember status.
type Concern struct {
	// Manager is the field manager that owns the concern's fields.
	Manager string
	// project keeps the concern's fields of a status and zeroes the rest:
	// what an apply of the concern sends.
	project func(s *v1alpha1.EtcdMemberStatus) v1alpha1.EtcdMemberStatus
}

// Project is the part of s the concern writes.
func (c Concern) Project(s *v1alpha1.EtcdMemberStatus) v1alpha1.EtcdMemberStatus {
	return c.project(s)
}

// The concerns. A field shares a manager with another only when every write
// decides both: a concern whose apply had to restate a field it did not
// decide would restate it from a read that may be behind. rolledAt and
// restartApproved are the exception: restartMember must write both at once
// (see Restart), and the clear of rolledAt restates the approval under the
// resourceVersion it read (IfUnchanged).
var (
	// MemberID is latched by the cluster controller from etcd's member list.
	MemberID = concern("cluster-member-id", func(s *status) status { return status{MemberID: s.MemberID} })
	// Role follows etcd's member list, written by the cluster controller.
	Role = concern("cluster-role", func(s *status) status { return status{Role: s.Role} })
	// Fence is the cluster controller's reason to keep a member out of
	// client traffic.
	Fence = concern("cluster-fence", func(s *status) status { return status{Fenced: s.Fenced} })
	// Restart is a rollout's restart: the approval the member controller
	// waits for and when it was given. One write holds both, so that no
	// member is restarted without the record that tells self-heal its
	// silence is on purpose.
	Restart = concern("cluster-restart", func(s *status) status { return status{RolledAt: s.RolledAt, RestartApproved: s.RestartApproved} })
	// Maintenance is what the cluster controller is doing to the member.
	Maintenance = concern("cluster-maintenance", func(s *status) status { return status{Maintenance: s.Maintenance} })
	// Defrag is when the cluster controller last finished defragmenting
	// the member.
	Defrag = concern("cluster-defrag", func(s *status) status { return status{LastDefragTime: s.LastDefragTime} })
	// Member is everything the member controller reports: its Pod, its
	// readiness, its version, its first boot and the startup flags.
	Member = concern("member", func(s *status) status {
		return status{
			ObservedGeneration: s.ObservedGeneration, Conditions: s.Conditions,
			PodName: s.PodName, PodUID: s.PodUID, Version: s.Version, NodeName: s.NodeName,
			FirstReadyTime: s.FirstReadyTime, ForceNewCluster: s.ForceNewCluster,
		}
	})
)

type status = v1alpha1.EtcdMemberStatus

func concern(name string, project func(s *status) status) Concern {
	return Concern{Manager: v1alpha1.FieldOwner + "/" + name, project: project}
}

// Concerns are all of them; each status field belongs to exactly one
// (TestConcernsPartitionStatus).
var Concerns = []Concern{MemberID, Role, Fence, Restart, Maintenance, Defrag, Member}
