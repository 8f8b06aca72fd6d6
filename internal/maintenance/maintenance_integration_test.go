//go:build integration

package maintenance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/maintenance"
	"github.com/quorumctl/etcd-operator/test/etcdload"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

// driver plays the operator against real etcd processes: it observes the
// members as the controller does, asks maintenance.Next, and carries the
// step out, so that the plan is checked against etcd's own numbers (what a
// compaction frees, what a defragmentation gives back, when NOSPACE can be
// disarmed) rather than a fake's.
type driver struct {
	t         *testing.T
	c         etcd.Client
	policy    maintenance.Policy
	compacted int64
	// defragmented maps a member to the compaction revision it was last
	// defragmented at.
	defragmented map[string]int64
	// steps are what was done, as "Action member".
	steps []string
}

func newDriver(t *testing.T, members []*etcdproc.Member, policy maintenance.Policy) *driver {
	c, err := etcd.NewDialer(etcd.WithDefragmentTimeout(2*time.Minute)).Dial(context.Background(), etcdproc.ClientURLs(members))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &driver{t: t, c: c, policy: policy, defragmented: map[string]int64{}}
}

func (d *driver) observe(ctx context.Context) (maintenance.Cluster, map[string]etcd.Member) {
	g := NewWithT(d.t)
	list, err := d.c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	alarms, err := d.c.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	c := maintenance.Cluster{Compacted: d.compacted, Now: time.Now()}
	byName := map[string]etcd.Member{}
	names := map[uint64]string{}
	statuses := map[uint64]*etcd.EndpointStatus{}
	var leader uint64
	for _, m := range list.Members {
		byName[m.Name], names[m.ID] = m, m.Name
		if st, err := d.c.Status(ctx, m.ClientURLs[0]); err == nil {
			statuses[m.ID] = &st
			leader = max(leader, st.LeaderID) // they agree on a healthy loopback cluster
		}
	}
	for _, a := range alarms {
		switch a.Type {
		case etcd.AlarmNoSpace:
			c.Alarms.NoSpace = append(c.Alarms.NoSpace, names[a.MemberID])
		case etcd.AlarmCorrupt:
			c.Alarms.Corrupt = append(c.Alarms.Corrupt, names[a.MemberID])
		}
	}
	for _, m := range list.Members {
		mem := maintenance.Member{Name: m.Name, Voter: !m.IsLearner, Leader: m.ID == leader, DefragmentedAt: d.defragmented[m.Name]}
		if st := statuses[m.ID]; st != nil {
			mem.Healthy = st.HealthyDespiteNoSpace(alarms) && st.LeaderID == leader
			mem.Applied = st.RaftAppliedIndex
			mem.Usage = maintenance.Usage{DBSize: st.DBSize, InUse: st.DBSizeInUse, Quota: st.DBSizeQuota}
			c.Revision = max(c.Revision, st.Revision)
		}
		c.Members = append(c.Members, mem)
	}
	return c, byName
}

// run takes steps until there is nothing left to do, or the plan stops on
// something the operator cannot do itself; it returns that last decision.
func (d *driver) run(ctx context.Context) maintenance.Decision {
	g := NewWithT(d.t)
	for range 40 {
		c, byName := d.observe(ctx)
		dec := maintenance.Next(c, d.policy)
		switch dec.Action {
		case maintenance.None, maintenance.OverQuota, maintenance.Blocked, maintenance.RecoveryOff:
			return dec
		case maintenance.Wait:
			time.Sleep(100 * time.Millisecond) // a member catching up after its defragmentation
			continue
		case maintenance.Compact:
			g.Expect(d.c.Compact(ctx, dec.Revision)).To(Succeed())
			d.compacted = dec.Revision
		case maintenance.MoveLeader:
			g.Expect(d.c.MoveLeader(ctx, byName[dec.To].ID)).To(Succeed())
		case maintenance.Defragment:
			g.Expect(d.c.Defragment(ctx, byName[dec.Member].ClientURLs[0])).To(Succeed())
			d.defragmented[dec.Member] = d.compacted
		case maintenance.Disarm:
			alarms, err := d.c.AlarmList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			for _, a := range alarms {
				g.Expect(d.c.AlarmDisarm(ctx, a)).To(Succeed())
			}
		}
		d.steps = append(d.steps, string(dec.Action)+" "+dec.Member)
		var sizes []string
		for _, m := range c.Members {
			sizes = append(sizes, m.Name+" "+maintenance.FormatBytes(m.Usage.DBSize)+"/"+maintenance.FormatBytes(m.Usage.Quota))
		}
		d.t.Logf("%s %s %s: %s [%s]", dec.Action, dec.Member, dec.To, dec.Reason, strings.Join(sizes, ", "))
	}
	d.t.Fatalf("maintenance did not settle: %v", d.steps)
	return maintenance.Decision{}
}

func leaderName(ctx context.Context, t *testing.T, c etcd.Client, members []*etcdproc.Member) string {
	for _, m := range members {
		st, err := c.Status(ctx, m.ClientURL)
		if err == nil && st.IsLeader() {
			return m.Name
		}
	}
	t.Fatal("no leader")
	return ""
}

var defaults = maintenance.Policy{Defrag: true, Rule: maintenance.DefaultRule(), NoSpaceRecovery: true}

// TestRecoversFromNoSpace fills a real 3-member cluster until NOSPACE with a
// third of what it wrote deleted, and follows the plan: it must compact,
// defragment the followers and then the leader after a handover, disarm,
// and leave the cluster writable with every live key.
func TestRecoversFromNoSpace(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{Members: 3, Args: []string{"--quota-backend-bytes=16777216"}})
	cli, err := etcdload.Dial(etcdproc.ClientURLs(members)...)
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	live, err := etcdload.Fill(ctx, cli, "fill", 64<<10, 3)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("NOSPACE after %d live keys", live.Count)

	d := newDriver(t, members, defaults)
	leader := leaderName(ctx, t, d.c, members)
	raised := time.Now()
	last := d.run(ctx)
	g.Expect(last.Action).To(Equal(maintenance.None))
	g.Expect(d.steps[0]).To(Equal("Compact "))
	var defragmented []string
	for _, s := range d.steps {
		if m, ok := strings.CutPrefix(s, "Defragment "); ok {
			defragmented = append(defragmented, m)
		}
	}
	g.Expect(defragmented).To(HaveLen(3), "every member once")
	g.Expect(defragmented[2]).To(Equal(leader), "the leader last")
	g.Expect(d.steps).To(ContainElement("MoveLeader "+leader), "after handing over")
	g.Expect(d.steps[len(d.steps)-1]).To(Equal("Disarm "))

	took, err := etcdload.WaitWritable(ctx, cli, "after", 100*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("NOSPACE to writable: %s (the last %s of it waiting for a write to go through)", time.Since(raised).Round(time.Millisecond), took.Round(time.Millisecond))
	for _, m := range members {
		one, err := etcdload.Dial(m.ClientURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(etcdload.Verify(ctx, one, live)).To(Succeed(), "every live key on %s", m.Name)
		_ = one.Close()
	}
}

// TestNoSpaceWithLiveDataOverTheQuota fills a cluster with live keys only:
// nothing a compaction or a defragmentation frees makes room, so the plan
// must end on OverQuota with the alarm still raised and every key intact.
func TestNoSpaceWithLiveDataOverTheQuota(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{Members: 3, Args: []string{"--quota-backend-bytes=16777216"}})
	cli, err := etcdload.Dial(etcdproc.ClientURLs(members)...)
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	// How much of a file is free pages when the first member reaches the
	// quota depends on when each member's backend committed, so the first
	// recovery's defragmentation may give back enough to disarm, rightly.
	// Fill again, live keys only, until the live data alone fills the quota.
	d := newDriver(t, members, defaults)
	var sets []etcdload.Set
	var last maintenance.Decision
	for round := 0; last.Action != maintenance.OverQuota; round++ {
		g.Expect(round).To(BeNumerically("<", 4), "live data still fits the quota after %d fills", round)
		live, err := etcdload.Fill(ctx, cli, fmt.Sprintf("fill-%d", round), 64<<10, 0)
		g.Expect(err).NotTo(HaveOccurred())
		sets = append(sets, live)
		last = d.run(ctx)
		c, _ := d.observe(ctx)
		for _, m := range c.Members {
			t.Logf("round %d: %s: %d of %d quota (%d in use)", round, m.Name, m.Usage.DBSize, m.Usage.Quota, m.Usage.InUse)
		}
		if last.Action != maintenance.OverQuota {
			g.Expect(last.Action).To(Equal(maintenance.None), last.Reason)
			g.Expect(d.steps[len(d.steps)-1]).To(Equal("Disarm "), "room was made without deleting, so the alarm is disarmed")
			_, err := etcdload.WaitWritable(ctx, cli, fmt.Sprintf("writable-%d", round), 100*time.Millisecond)
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	g.Expect(last.Reason).To(ContainSubstring("Raise spec.options.quotaBackendBytes, or grow spec.storage.size"))
	alarms, err := d.c.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alarms).NotTo(BeEmpty(), "not disarmed: etcd would raise it again at once")
	for _, live := range sets {
		g.Expect(etcdload.Verify(ctx, cli, live)).To(Succeed(), "nothing is deleted")
	}
}

// TestDefragmentsAFragmentedCluster leaves most of a real cluster's
// database free after a compaction; the rule must find every member due and
// defragment them, the leader last, until their files shrink.
func TestDefragmentsAFragmentedCluster(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{Members: 3})
	cli, err := etcdload.Dial(etcdproc.ClientURLs(members)...)
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	live, err := etcdload.Fragment(ctx, cli, "frag", 24<<20, 64<<10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(etcdload.Compact(ctx, cli)).To(Succeed())
	// A write after the compaction lets bbolt count its last batch free.
	_, err = etcdload.WaitWritable(ctx, cli, "after-compaction", 100*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())

	policy := defaults
	policy.Rule.MinReclaim = 8 << 20
	d := newDriver(t, members, policy)
	leader := leaderName(ctx, t, d.c, members)
	g.Eventually(func() int {
		// bbolt counts pages freed by a transaction only once a later
		// write finds no reader holding them, and a follower may finish
		// its compaction after any one write: so write on every poll.
		_, _ = cli.Put(ctx, "after-compaction", time.Now().String())
		due := 0
		c, _ := d.observe(ctx)
		for _, m := range c.Members {
			if policy.Rule.Evaluate(m.Usage).Due {
				due++
			}
		}
		return due
	}).WithTimeout(30*time.Second).Should(Equal(3), "every member is due once the backend has committed")
	before, _ := d.observe(ctx)
	last := d.run(ctx)
	g.Expect(last.Action).To(Equal(maintenance.None), last.Reason)
	var order []string
	for _, s := range d.steps {
		if m, ok := strings.CutPrefix(s, "Defragment "); ok {
			order = append(order, m)
		}
	}
	g.Expect(order).To(HaveLen(3))
	g.Expect(order[2]).To(Equal(leader))
	after, _ := d.observe(ctx)
	for i, m := range after.Members {
		g.Expect(m.Usage.DBSize).To(BeNumerically("<", before.Members[i].Usage.DBSize/2), "%s shrinks", m.Name)
	}
	g.Expect(etcdload.Verify(ctx, cli, live)).To(Succeed())
}
