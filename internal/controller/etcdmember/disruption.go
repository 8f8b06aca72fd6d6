package etcdmember

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/quorum"
)

// The member controller does two things that take a voter out of service:
// the finalizer removes a member from etcd, and an approved restart deletes
// a member's Pod. Each is decided elsewhere, from a look that may be behind
// (the cluster controller's cache, a user's kubectl delete), so each checks
// etcd itself right before it acts, and the two are never interleaved for
// one cluster: a removal whose check found a member healthy must not meet
// that member's restart before the removal is done, or two voters go at
// once.

// requeueDisruption is how soon a restart that the quorum held back is
// looked at again.
const requeueDisruption = 2 * time.Second

// disruptions serializes the disruptive actions of one cluster, and
// remembers the restarts it made until each member's new Pod is ready: a Pod
// deleted a moment ago still answers while it shuts down, and must not be
// counted on by a removal that follows.
//
// A cluster's entry lives only while someone uses it or a restart of one of
// its members is in flight: one operator sees clusters come and go for as
// long as it runs, and an entry left behind by each would add up. Dropping
// an unused entry loses nothing, since a new one is the same: unlocked, with
// no restart in flight.
type disruptions struct {
	mu sync.Mutex
	m  map[string]*clusterDisruptions
}

type clusterDisruptions struct {
	// refs counts the holders of the entry, under disruptions.mu.
	refs int
	mu   sync.Mutex
	// restarted maps a member's name to the UID of the Pod it deleted.
	restarted map[string]types.UID
}

func clusterKey(m *v1alpha1.EtcdMember) string { return m.Namespace + "/" + m.Spec.ClusterName }

// hold returns the entry of m's cluster, to be handed back with release.
func (d *disruptions) hold(m *v1alpha1.EtcdMember) *clusterDisruptions {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]*clusterDisruptions{}
	}
	c, ok := d.m[clusterKey(m)]
	if !ok {
		c = &clusterDisruptions{restarted: map[string]types.UID{}}
		d.m[clusterKey(m)] = c
	}
	c.refs++
	return c
}

// release hands an entry back and drops it once no one holds it and no
// restart is in flight. With no holder left, no one else can reach
// c.restarted: the map lookup that would is under d.mu.
func (d *disruptions) release(m *v1alpha1.EtcdMember, c *clusterDisruptions) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.refs--
	if c.refs == 0 && len(c.restarted) == 0 {
		delete(d.m, clusterKey(m))
	}
}

// clusters is the number of clusters with an entry, for tests.
func (d *disruptions) clusters() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.m)
}

// lock holds the cluster's disruptive actions until the returned func runs.
func (d *disruptions) lock(m *v1alpha1.EtcdMember) func() {
	c := d.hold(m)
	c.mu.Lock()
	return func() {
		c.mu.Unlock()
		d.release(m, c)
	}
}

// restarted records, under the lock, that the member's Pod was deleted.
func (d *disruptions) restarted(m *v1alpha1.EtcdMember, old types.UID) {
	c := d.hold(m)
	defer d.release(m, c)
	c.restarted[m.Name] = old
}

// settle forgets a member's restart once a Pod other than the one deleted
// is ready.
func (d *disruptions) settle(m *v1alpha1.EtcdMember, current *corev1.Pod, ready bool) {
	c := d.hold(m)
	defer d.release(m, c)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.restarted[m.Name]; ok && current != nil && current.UID != old && ready {
		delete(c.restarted, m.Name)
	}
}

// forget drops what is remembered of a member that is gone.
func (d *disruptions) forget(m *v1alpha1.EtcdMember) {
	c := d.hold(m)
	defer d.release(m, c)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.restarted, m.Name)
}

// restarting names, under the lock, the members whose restart is in flight.
func (d *disruptions) restarting(m *v1alpha1.EtcdMember) map[string]bool {
	c := d.hold(m)
	defer d.release(m, c)
	out := map[string]bool{}
	for name := range c.restarted {
		out[name] = true
	}
	return out
}

// discount marks the voters whose restart is in flight as unhealthy.
func (r *Reconciler) discount(healthy map[uint64]bool, list etcd.MemberList, siblings []v1alpha1.EtcdMember, restarting map[string]bool) {
	for i := range siblings {
		s := &siblings[i]
		if !restarting[s.Name] {
			continue
		}
		if em, ok := findSelf(list, s, s.PeerURLIn(r.ClusterDomain)); ok {
			healthy[em.ID] = false
		}
	}
}

// restartAllowed: etcd, asked now, keeps a quorum of its voters with m out
// of service: every voter but m that answers with a leader counts. A member
// etcd does not list, or lists as a learner, holds no vote to lose; a
// cluster of one has nobody to keep.
func (r *Reconciler) restartAllowed(ctx context.Context, m *v1alpha1.EtcdMember) (bool, string, error) {
	cluster := &v1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		return false, "", fmt.Errorf("failed to get EtcdCluster %s: %w", m.Spec.ClusterName, err)
	}
	// The same members, reached the same way (the scheme the access says,
	// which during a TLS transition is not always the one a member's
	// recorded URL names), as the finalizer's removal asks.
	siblings, access, endpoints, err := r.reachOthers(ctx, cluster, m)
	if err != nil {
		return false, "", err
	}
	if len(endpoints) == 0 {
		return true, "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, removalTimeout)
	defer cancel()
	c, err := r.Dialer.Dial(ctx, endpoints, access.Options...)
	if err != nil {
		return false, fmt.Sprintf("cannot reach etcd: %v", err), nil
	}
	defer c.Close()
	list, err := c.MemberList(ctx)
	if err != nil {
		return false, fmt.Sprintf("cannot list etcd members: %v", err), nil
	}
	self, found := findSelf(list, m, m.PeerURLIn(r.ClusterDomain))
	if !found || self.IsLearner {
		return true, "", nil
	}
	voters, healthyOthers, _ := r.countVoters(ctx, c, list, siblings, m, self.ID)
	if voters > 1 && healthyOthers < quorum.Size(voters) {
		return false, fmt.Sprintf("restarting it would leave %d healthy of %d voters, below quorum %d", healthyOthers, voters, quorum.Size(voters)), nil
	}
	return true, "", nil
}

// countVoters asks etcd which voters answer, discounts those whose restart
// has just begun, and counts the voters and the healthy ones other than
// self: what a restart and a removal both weigh against the quorum.
func (r *Reconciler) countVoters(ctx context.Context, c etcd.Client, list etcd.MemberList, siblings []v1alpha1.EtcdMember,
	m *v1alpha1.EtcdMember, self uint64) (voters, healthyOthers int, selfHealthy bool) {
	healthy := healthyVoters(ctx, c, list)
	r.discount(healthy, list, siblings, r.disruptions.restarting(m))
	for _, v := range list.Members {
		if v.IsLearner {
			continue
		}
		voters++
		if v.ID != self && healthy[v.ID] {
			healthyOthers++
		}
	}
	return voters, healthyOthers, healthy[self]
}
