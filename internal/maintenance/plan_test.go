package maintenance

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// tidy is a healthy voter with nothing to give back.
func tidy(name string) Member {
	return Member{Name: name, Voter: true, Healthy: true, Applied: 5000,
		Usage: Usage{DBSize: 100 * mib, InUse: 99 * mib, Quota: 2 * gib}}
}

// fragmented is a healthy voter with 200 MiB of its 300 MiB file free.
func fragmented(name string) Member {
	m := tidy(name)
	m.Usage = Usage{DBSize: 300 * mib, InUse: 100 * mib, Quota: 2 * gib}
	return m
}

func leader(m Member) Member         { m.Leader = true; return m }
func down(m Member) Member           { m.Healthy = false; return m }
func behind(m Member) Member         { m.Applied = 1; return m }
func learner(m Member) Member        { m.Voter = false; return m }
func ahead(m Member) Member          { m.Applied = 6000; return m }
func recent(m Member) Member         { m.LastDefrag = now.Add(-time.Minute); return m }
func longAgo(m Member) Member        { m.LastDefrag = now.Add(-time.Hour); return m }
func retry(m Member) Member          { m.RetryAt = now.Add(30 * time.Second); return m }
func usage(m Member, u Usage) Member { m.Usage = u; return m }

var defaults = Policy{Defrag: true, Rule: DefaultRule(), NoSpaceRecovery: true}

const freeWhy = "200.0 MiB of its 300.0 MiB database is free (67%)"

func TestNextDefragment(t *testing.T) {
	t.Parallel()
	nightly, err := ParseWindow("0 2 * * *", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		cluster Cluster
		policy  Policy
		want    Decision
	}{
		{"nothing due", Cluster{Members: []Member{leader(tidy("a")), tidy("b"), tidy("c")}}, defaults,
			Decision{Action: None, Reason: "no member needs defragmentation"}},
		{"followers first, by name", Cluster{Members: []Member{leader(fragmented("a")), fragmented("c"), fragmented("b")}}, defaults,
			Decision{Action: Defragment, Member: "b", Reason: freeWhy}},
		{"only due members", Cluster{Members: []Member{leader(fragmented("a")), tidy("b"), fragmented("c")}}, defaults,
			Decision{Action: Defragment, Member: "c", Reason: freeWhy}},
		{"the leader last, after leadership moves to a member that is done", Cluster{Members: []Member{
			leader(fragmented("a")), ahead(recent(fragmented("b"))), tidy("c")}}, defaults,
			Decision{Action: MoveLeader, Member: "a", To: "b", Reason: "before defragmenting it"}},
		{"among those done, the one furthest ahead", Cluster{Members: []Member{
			leader(fragmented("a")), tidy("b"), ahead(tidy("c"))}}, defaults,
			Decision{Action: MoveLeader, Member: "a", To: "c", Reason: "before defragmenting it"}},
		{"a one-member cluster defragments its only member", Cluster{Members: []Member{leader(fragmented("a"))}}, defaults,
			Decision{Action: Defragment, Member: "a", Reason: freeWhy}},
		{"a member just defragmented is not again, whatever the rule says", Cluster{Members: []Member{leader(tidy("a")), recent(fragmented("b"))}}, defaults,
			Decision{Action: None, Reason: "no member needs defragmentation"}},
		{"but it is once MinInterval has passed", Cluster{Members: []Member{leader(tidy("a")), longAgo(fragmented("b"))}}, defaults,
			Decision{Action: Defragment, Member: "b", Reason: freeWhy}},
		{"nor one whose defragmentation just failed", Cluster{Members: []Member{leader(tidy("a")), retry(fragmented("b"))}}, defaults,
			Decision{Action: None, Reason: "no member needs defragmentation"}},
		{"learners are never defragmented", Cluster{Members: []Member{leader(tidy("a")), learner(fragmented("b"))}}, defaults,
			Decision{Action: None, Reason: "no member needs defragmentation"}},
		{"every voter must be healthy", Cluster{Members: []Member{leader(tidy("a")), down(tidy("b")), fragmented("c")}}, defaults,
			Decision{Action: Wait, Reason: "defragmentation is due (c: " + freeWhy + "); waiting for b to be healthy"}},
		{"and caught up, so the one done last is back before the next", Cluster{Members: []Member{leader(tidy("a")), behind(tidy("b")), fragmented("c")}}, defaults,
			Decision{Action: Wait, Reason: "defragmentation is due (c: " + freeWhy + "); waiting for b to catch up (applied index 1, the leader's 5000)"}},
		{"no leader", Cluster{Members: []Member{tidy("a"), fragmented("b")}}, defaults,
			Decision{Action: Wait, Reason: "defragmentation is due (b: " + freeWhy + "); waiting for a leader"}},
		{"a membership change in flight", Cluster{Members: []Member{leader(tidy("a")), fragmented("b")}, Settling: "learner d to be promoted"}, defaults,
			Decision{Action: Wait, Reason: "defragmentation is due (b: " + freeWhy + "); waiting for learner d to be promoted"}},
		{"a rollout or a scale goes first", Cluster{Members: []Member{leader(tidy("a")), fragmented("b")}, Busy: "the rollout"}, defaults,
			Decision{Action: Wait, Reason: "defragmentation is due (b: " + freeWhy + "); waiting for the rollout"}},
		{"outside the window", Cluster{Members: []Member{leader(tidy("a")), fragmented("b")}, Now: now},
			Policy{Defrag: true, Rule: DefaultRule(), Window: nightly},
			Decision{Action: Wait, Reason: "defragmentation is due (b: " + freeWhy + `); it starts within 1h0m0s of each tick of "0 2 * * *", next at 2026-03-02T02:00:00Z`}},
		{"inside the window", Cluster{Members: []Member{leader(tidy("a")), fragmented("b")}, Now: now.Add(-10 * time.Hour)},
			Policy{Defrag: true, Rule: DefaultRule(), Window: nightly},
			Decision{Action: Defragment, Member: "b", Reason: freeWhy}},
		{"switched off", Cluster{Members: []Member{leader(fragmented("a")), fragmented("b")}}, Policy{NoSpaceRecovery: true},
			Decision{Action: None, Reason: "automatic defragmentation is off (spec.maintenance.defrag.enabled)"}},
		{"a CORRUPT alarm blocks everything", Cluster{Members: []Member{leader(fragmented("a")), fragmented("b")}, Alarms: Alarms{Corrupt: []string{"b"}}}, defaults,
			Decision{Action: Blocked, Reason: "etcd raised a CORRUPT alarm on b: the operator neither compacts nor defragments a cluster whose data may be corrupt; find the member whose data differs and replace it"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.cluster
			if c.Now.IsZero() {
				c.Now = now
			}
			NewWithT(t).Expect(Next(c, tc.policy)).To(Equal(tc.want))
		})
	}
}

// full is a healthy voter of a cluster that hit its 256 MiB quota.
func full(name string) Member {
	m := tidy(name)
	m.Usage = Usage{DBSize: 256 * mib, InUse: 250 * mib, Quota: 256 * mib}
	return m
}

// done is a member defragmented since the compaction at revision 900.
func done(name string) Member {
	m := tidy(name)
	m.Usage = Usage{DBSize: 170 * mib, InUse: 170 * mib, Quota: 256 * mib}
	m.DefragmentedAt = 900
	return m
}

func TestNextNoSpace(t *testing.T) {
	t.Parallel()
	alarm := Alarms{NoSpace: []string{"b"}}
	overQuotaMsg := func(member, size string, pct int) string {
		return "etcd refuses writes (NOSPACE): the live data of " + member + " is " + size + ", " + strconv.Itoa(pct) + "% of its 256.0 MiB backend quota, even after compaction and defragmentation; " +
			"the operator deletes nothing. Raise spec.options.quotaBackendBytes, or grow spec.storage.size " +
			"(the default quota is a third of the volume after the write-ahead log's 128 MB); " +
			"the members are then rolled and the alarm is disarmed. Deleting keys also works"
	}
	const rewrite = "recovering from NOSPACE: compacted at revision 900, its 256.0 MiB database is rewritten without the history"
	overDone := func(name string, size int64) Member {
		m := done(name)
		m.Usage.DBSize, m.Usage.InUse = size, size
		return m
	}
	cases := []struct {
		name    string
		cluster Cluster
		policy  Policy
		want    Decision
	}{
		{"compact at the current revision first", Cluster{Members: []Member{leader(full("a")), full("b"), full("c")}, Alarms: alarm, Revision: 900}, defaults,
			Decision{Action: Compact, Revision: 900, NoSpace: true, Reason: "etcd raised NOSPACE on b and refuses writes; compacting at revision 900, then defragmenting each member and disarming"}},
		{"then every member, followers first, whatever Status says is free", Cluster{Members: []Member{leader(full("a")), full("b"), full("c")}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: Defragment, Member: "b", NoSpace: true, Reason: rewrite}},
		{"a compaction since the last one, after deletes, and every member again", Cluster{Members: []Member{leader(done("a")), done("b")}, Alarms: alarm, Revision: 950, Compacted: 900}, defaults,
			Decision{Action: Compact, Revision: 950, NoSpace: true, Reason: "etcd raised NOSPACE on b and refuses writes; compacting at revision 950, then defragmenting each member and disarming"}},
		{"followers before the leader", Cluster{Members: []Member{leader(full("a")), done("b"), ahead(full("c"))}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: Defragment, Member: "c", NoSpace: true, Reason: rewrite}},
		{"the leader last, after handing over to the member that is done and furthest ahead", Cluster{Members: []Member{leader(full("a")), done("b"), ahead(done("c"))}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: MoveLeader, Member: "a", To: "c", NoSpace: true, Reason: "before defragmenting it"}},
		{"and the window, the rule and the interval do not apply", Cluster{Members: []Member{leader(done("a")), recent(full("b"))}, Alarms: alarm, Revision: 900, Compacted: 900},
			Policy{Defrag: false, NoSpaceRecovery: true},
			Decision{Action: Defragment, Member: "b", NoSpace: true, Reason: rewrite}},
		{"disarm once every member is done", Cluster{Members: []Member{leader(done("a")), done("b"), done("c")}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: Disarm, NoSpace: true, Reason: "every member is compacted and defragmented; disarming NOSPACE on b"}},
		{"live data over the quota: say so, touch nothing more", Cluster{Members: []Member{
			leader(overDone("a", 250*mib)), done("b")}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: OverQuota, Member: "a", NoSpace: true, Reason: overQuotaMsg("a", "250.0 MiB", 98)}},
		{"the one over it the most is named", Cluster{Members: []Member{
			leader(overDone("a", 245*mib)), overDone("b", 250*mib)}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: OverQuota, Member: "b", NoSpace: true, Reason: overQuotaMsg("b", "250.0 MiB", 98)}},
		{"just under the line is disarmed", Cluster{Members: []Member{
			leader(overDone("a", 230*mib)), done("b")}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: Disarm, NoSpace: true, Reason: "every member is compacted and defragmented; disarming NOSPACE on b"}},
		{"a raised quota lets it through", Cluster{Members: []Member{
			leader(usage(done("a"), Usage{DBSize: 250 * mib, InUse: 250 * mib, Quota: 512 * mib})), usage(done("b"), Usage{DBSize: 250 * mib, InUse: 250 * mib, Quota: 512 * mib})},
			Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: Disarm, NoSpace: true, Reason: "every member is compacted and defragmented; disarming NOSPACE on b"}},
		{"a failed member is tried again later", Cluster{Members: []Member{leader(full("a")), retry(full("b"))}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: Wait, NoSpace: true, Reason: "recovering from NOSPACE on b; the defragmentation of b failed, trying again at 2026-03-01T12:00:30Z"}},
		{"and a failed compaction", Cluster{Members: []Member{leader(full("a")), full("b")}, Alarms: alarm, Revision: 900, CompactRetryAt: now.Add(30 * time.Second)}, defaults,
			Decision{Action: Wait, NoSpace: true, Reason: "etcd raised NOSPACE on b; the compaction failed, trying again at 2026-03-01T12:00:30Z"}},
		{"every voter healthy before anything", Cluster{Members: []Member{leader(full("a")), down(full("b"))}, Alarms: alarm, Revision: 900}, defaults,
			Decision{Action: Wait, NoSpace: true, Reason: "etcd raised NOSPACE on b; waiting for b to be healthy before recovering"}},
		{"compaction does not wait for a member to catch up", Cluster{Members: []Member{leader(full("a")), behind(full("b"))}, Alarms: alarm, Revision: 900}, defaults,
			Decision{Action: Compact, Revision: 900, NoSpace: true, Reason: "etcd raised NOSPACE on b and refuses writes; compacting at revision 900, then defragmenting each member and disarming"}},
		{"defragmentation does", Cluster{Members: []Member{leader(full("a")), behind(full("b"))}, Alarms: alarm, Revision: 900, Compacted: 900}, defaults,
			Decision{Action: Wait, NoSpace: true, Reason: "recovering from NOSPACE on b; waiting for b to catch up (applied index 1, the leader's 5000)"}},
		{"a membership change in flight", Cluster{Members: []Member{leader(full("a")), full("b")}, Alarms: alarm, Revision: 900, Settling: "member d to be added"}, defaults,
			Decision{Action: Wait, NoSpace: true, Reason: "etcd raised NOSPACE on b; waiting for member d to be added before recovering"}},
		{"a rollout does not hold recovery back", Cluster{Members: []Member{leader(full("a")), full("b")}, Alarms: alarm, Revision: 900, Compacted: 900, Busy: "the rollout"}, defaults,
			Decision{Action: Defragment, Member: "b", NoSpace: true, Reason: rewrite}},
		{"recovery switched off", Cluster{Members: []Member{leader(full("a")), full("b")}, Alarms: alarm}, Policy{Defrag: true},
			Decision{Action: RecoveryOff, NoSpace: true, Reason: "etcd raised NOSPACE on b and refuses writes; spec.maintenance.noSpaceRecovery is off: compact, defragment (kubectl etcd compact, kubectl etcd defrag) and disarm (kubectl etcd alarms disarm)"}},
		{"CORRUPT wins over NOSPACE", Cluster{Members: []Member{leader(full("a")), full("b")}, Alarms: Alarms{NoSpace: []string{"b"}, Corrupt: []string{"a"}}}, defaults,
			Decision{Action: Blocked, Reason: "etcd raised a CORRUPT alarm on a: the operator neither compacts nor defragments a cluster whose data may be corrupt; find the member whose data differs and replace it"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.cluster
			c.Now = now
			NewWithT(t).Expect(Next(c, tc.policy)).To(Equal(tc.want))
		})
	}
}

func TestOrder(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ms := Order([]Member{leader(tidy("b")), tidy("d"), learner(tidy("a")), tidy("c")})
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	g.Expect(names).To(Equal([]string{"a", "c", "d", "b"}), "everyone but the leader by name, the leader last")
}
