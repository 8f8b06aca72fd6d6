//go:build integration

package recovery

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/recovery"
	"github.com/quorumctl/etcd-operator/internal/remediation"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

// TestSurvivorBehindAnother runs, on every pinned etcd release, the e2e
// refusal of a survivor that is behind another: of five members, m0 stops,
// keys are written to the four left, three lose their data dirs, and m0
// starts again on its old data. Without a quorum m0 never serves a client
// request (etcd serves clients only once a quorum has committed its start),
// so its Status does not answer; its metrics endpoint does, and the guards,
// fed as the operator feeds them, refuse m0 by name and choose m1.
func TestSurvivorBehindAnother(t *testing.T) {
	for _, version := range etcdproc.Versions(t) {
		t.Run(version, func(t *testing.T) { survivorBehindAnother(t, version) })
	}
}

func survivorBehindAnother(t *testing.T, version string) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := etcdproc.Binary(t, version)
	members := etcdproc.StartCluster(t, bin, etcdproc.Options{Members: 5})
	dialer := etcd.NewDialer()
	reader := etcd.NewMetricsReader(nil)
	ids := map[string]uint64{}
	list, err := listAt(ctx, dialer, members[1])
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range list.Members {
		ids[m.Name] = m.ID
	}
	clusterID := list.ClusterID

	put := func(prefix string, n int) {
		kv := kvClient(t, etcdproc.ClientURLs(members[1:])...)
		defer func() { _ = kv.Close() }()
		for i := range n {
			_, err := kv.Put(ctx, fmt.Sprintf("%s/%04d", prefix, i), "v")
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	put("early", 20)
	lagging, ahead := members[0], members[1]
	lagging.Stop()
	put("late", 50)
	for _, m := range members[2:] {
		g.Expect(m.WipeDataDir()).To(Succeed())
	}
	// Until the four's leader, if m1 is it, sees it has no quorum, it
	// could still bring m0 up to date; in the e2e case m0 comes back long
	// after.
	g.Eventually(func() uint64 { return statusOf(ctx, t, dialer, ahead).LeaderID }, time.Minute, 200*time.Millisecond).Should(BeZero())
	g.Expect(lagging.Restart()).To(Succeed())

	t.Log("the lagging member runs on its data but serves no client without a quorum")
	var rep etcd.SelfReport
	g.Eventually(func() error {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		rep, err = reader.SelfReport(rctx, lagging.MetricsURL)
		if err == nil && rep.HasLeader {
			return errors.New("it still follows a leader")
		}
		return err
	}, time.Minute, 200*time.Millisecond).Should(Succeed(), lagging.LogTail(20))
	g.Expect(rep.MemberID).To(Equal(ids[lagging.Name]))
	_, err = status(ctx, dialer, lagging)
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "Status waits out its deadline: %v", err)

	t.Log("the guards compare the survivors as the operator gathers them")
	facts := recovery.Cluster{Name: "c", ClusterID: etcd.FormatMemberID(clusterID)}
	for _, m := range members {
		rm := recovery.Member{Name: m.Name, ID: ids[m.Name], Voter: true}
		st, err := status(ctx, dialer, m)
		switch {
		case err == nil:
			g.Expect(st.ClusterID).To(Equal(clusterID))
			rm.Answered, rm.Status = true, st
		case m.MetricsURL != "" && !m.Exited():
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			r, rerr := reader.SelfReport(rctx, m.MetricsURL)
			cancel()
			g.Expect(rerr).NotTo(HaveOccurred(), "%s runs, so its metrics answer", m.Name)
			g.Expect(r.MemberID).To(Equal(ids[m.Name]))
			rm.Report(r, m.MetricsURL)
		default:
			rm.Verdict = remediation.DataDirLost
		}
		facts.Members = append(facts.Members, rm)
	}
	loss := recovery.Assess(facts.Members)
	g.Expect(loss.ForGood()).To(BeTrue())
	g.Expect(loss.Survivors).To(HaveLen(2))
	g.Expect(loss.Survivors[0].Name).To(Equal(ahead.Name))
	behind, front := loss.Survivors[1].Status, loss.Survivors[0].Status
	g.Expect(front.Revision).To(BeNumerically(">=", behind.Revision+50), "the late writes reached only %s", ahead.Name)
	g.Expect(front.RaftAppliedIndex).To(BeNumerically(">", behind.RaftAppliedIndex))

	plan, refused := recovery.Decide(facts, recovery.Request{Source: v1alpha1.RecoverySource{
		Survivor: &v1alpha1.SurvivorSource{Member: lagging.Name}}}, nil, time.Now())
	g.Expect(plan).To(BeNil())
	g.Expect(refused).NotTo(BeNil())
	g.Expect(refused.Reason).To(Equal(v1alpha1.SurvivorBehindReason))
	g.Expect(refused.Message).To(ContainSubstring(fmt.Sprintf("member %s is behind member %s", lagging.Name, ahead.Name)))

	plan, refused = recovery.Decide(facts, recovery.Request{Source: v1alpha1.RecoverySource{
		Survivor: &v1alpha1.SurvivorSource{}}}, nil, time.Now())
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Survivor).To(Equal(ahead.Name))
	g.Expect(plan.Removed).To(ContainElement(lagging.Name))
}
