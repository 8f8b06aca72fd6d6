//go:build integration

package recovery

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/recovery"
	"github.com/quorumctl/etcd-operator/internal/remediation"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

const keys = 200

// TestRecoverFromSurvivor runs, on every pinned etcd release, what the
// operator does after two of three members lost their data dirs: the
// wiped members fail as self-heal recognises, the survivor is chosen from
// what each member reports on its own endpoint, restarted with the
// operator's startup values and --force-new-cluster, restarted again once
// the flag is cleared, and joined by two fresh learners that are promoted.
// Every key the survivor had is on every member, under the old cluster ID.
func TestRecoverFromSurvivor(t *testing.T) {
	for _, version := range etcdproc.Versions(t) {
		t.Run(version, func(t *testing.T) { recoverFromSurvivor(t, version) })
	}
}

func recoverFromSurvivor(t *testing.T, version string) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := etcdproc.Binary(t, version)
	members := etcdproc.StartCluster(t, bin, etcdproc.Options{Members: 3})
	dialer := etcd.NewDialer()

	kv := kvClient(t, etcdproc.ClientURLs(members)...)
	for i := range keys {
		_, err := kv.Put(ctx, fmt.Sprintf("key/%04d", i), fmt.Sprintf("value-%d", i))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_ = kv.Close()
	before := statusOf(ctx, t, dialer, members[0])
	survivorID, clusterID := before.MemberID, before.ClusterID
	ids := map[string]uint64{}
	list, err := listAt(ctx, dialer, members[0])
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range list.Members {
		ids[m.Name] = m.ID
	}

	t.Log("two of three members lose their data dirs and stop")
	for _, m := range members[1:] {
		g.Expect(m.WipeDataDir()).To(Succeed())
	}
	t.Log("a wiped member started as the operator starts a booted one fails the way self-heal recognises")
	g.Expect(members[1].RestartWithEnv(startupValues(members[1], ids, false))).To(Succeed())
	g.Expect(members[1].WaitExited(time.Minute)).To(Succeed())
	reason, line, ok := remediation.ClassifyTermination(members[1].LogTail(20))
	g.Expect(ok).To(BeTrue(), "unclassified:\n%s", members[1].LogTail(20))
	g.Expect(reason).To(Equal(remediation.DataDirLost), line)

	t.Log("the survivor sees no leader; the survivor is chosen from each member's own answer")
	g.Eventually(func() uint64 { return statusOf(ctx, t, dialer, members[0]).LeaderID }, time.Minute, 200*time.Millisecond).Should(BeZero())
	facts := recovery.Cluster{Name: "c", ClusterID: etcd.FormatMemberID(clusterID)}
	for _, m := range members {
		rm := recovery.Member{Name: m.Name, ID: ids[m.Name], Voter: true}
		if st, err := status(ctx, dialer, m); err == nil {
			rm.Answered, rm.Status = true, st
		} else {
			rm.Verdict = remediation.DataDirLost
		}
		facts.Members = append(facts.Members, rm)
	}
	plan, refused := recovery.Decide(facts, recovery.Request{Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{}}}, nil, time.Now())
	g.Expect(refused).To(BeNil())
	g.Expect(plan.Survivor).To(Equal(members[0].Name))
	g.Expect(plan.Removed).To(Equal([]string{members[1].Name, members[2].Name}))
	survivorRev := plan.Revision
	g.Expect(survivorRev).To(BeNumerically(">=", keys))

	t.Log("the survivor restarts on its data with the startup values and --force-new-cluster")
	members[0].Stop()
	g.Expect(members[0].RestartWithEnv(startupValues(members[0], ids, true))).To(Succeed())
	g.Expect(members[0].WaitReady(time.Minute)).To(Succeed(), members[0].LogTail(30))
	alone, err := linearizableList(ctx, dialer, members[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alone.ClusterID).To(Equal(clusterID), "the cluster ID is kept")
	g.Expect(alone.Members).To(HaveLen(1))
	g.Expect(alone.Members[0].ID).To(Equal(survivorID), "and the survivor's member ID")
	st := statusOf(ctx, t, dialer, members[0])
	g.Expect(st.IsLeader()).To(BeTrue())
	g.Expect(st.Revision).To(Equal(survivorRev), "the force changes no data")

	t.Log("the flag is cleared, and a restart without it is an ordinary one")
	members[0].Stop()
	g.Expect(members[0].RestartWithEnv(startupValues(members[0], ids, false))).To(Succeed())
	g.Expect(members[0].WaitReady(time.Minute)).To(Succeed(), members[0].LogTail(30))
	alone, err = linearizableList(ctx, dialer, members[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alone.Members).To(HaveLen(1))

	t.Log("two fresh members join as learners and are promoted")
	current := []*etcdproc.Member{members[0]}
	for i := range 2 {
		joiner := etcdproc.NewMember(t, bin, fmt.Sprintf("fresh%d", i), members[0])
		c, err := dialer.Dial(ctx, etcdproc.ClientURLs(current))
		g.Expect(err).NotTo(HaveOccurred())
		var added etcd.Member
		var after etcd.MemberList
		g.Eventually(func() error {
			added, after, err = c.MemberAddAsLearner(ctx, []string{joiner.PeerURL})
			return err
		}, time.Minute, 500*time.Millisecond).Should(Succeed())
		g.Expect(joiner.Join(initialCluster(after, joiner))).To(Succeed())
		g.Eventually(func() error {
			_, err := c.MemberPromote(ctx, added.ID)
			if err != nil && !etcd.IsLearnerNotReady(err) && !etcd.IsUnhealthyCluster(err) && !etcd.IsUnavailable(err) {
				return StopTrying(err.Error())
			}
			return err
		}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), joiner.LogTail(30))
		_ = c.Close()
		current = append(current, joiner)
		g.Expect(joiner.WaitReady(time.Minute)).To(Succeed(), joiner.LogTail(30))
	}

	final, err := linearizableList(ctx, dialer, current[2])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(final.ClusterID).To(Equal(clusterID))
	g.Expect(final.Members).To(HaveLen(3))
	for _, m := range final.Members {
		g.Expect(m.IsLearner).To(BeFalse(), "%s is a voter", m.Name)
	}
	for _, m := range current {
		cli := kvClient(t, m.ClientURL)
		resp, err := cli.Get(ctx, "key/", clientv3.WithPrefix())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Kvs).To(HaveLen(keys), "every key the survivor had is on %s", m.Name)
		for _, kv := range resp.Kvs {
			var i int
			_, err := fmt.Sscanf(string(kv.Key), "key/%04d", &i)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(kv.Value)).To(Equal(fmt.Sprintf("value-%d", i)))
		}
		_, err = cli.Put(ctx, "after/"+m.Name, "written")
		g.Expect(err).NotTo(HaveOccurred(), "the grown cluster takes writes through %s", m.Name)
		_ = cli.Close()
	}
}

// startupValues are the ETCD_* variables of a booted member's startup
// ConfigMap, as the member controller writes it.
func startupValues(m *etcdproc.Member, ids map[string]uint64, force bool) map[string]string {
	booted := metav1.Now()
	em := &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: "ns"},
		Spec: v1alpha1.EtcdMemberSpec{ClusterName: "c", InitialCluster: m.Name + "=" + m.PeerURL, ClusterToken: m.Token,
			PeerURL: m.PeerURL, ClientURL: m.ClientURL, ForceNewCluster: force},
		Status: v1alpha1.EtcdMemberStatus{MemberID: etcd.FormatMemberID(ids[m.Name]), FirstReadyTime: &booted},
	}
	return pod.BuildStartupConfig(pod.Params{Member: em, ClusterFormed: true}).Data
}

// initialCluster renders etcd's member list after an add as the joiner's
// --initial-cluster, naming the joiner, which has not started yet.
func initialCluster(list etcd.MemberList, joiner *etcdproc.Member) string {
	var entries []string
	for _, m := range list.Members {
		name := m.Name
		if name == "" && len(m.PeerURLs) > 0 && m.PeerURLs[0] == joiner.PeerURL {
			name = joiner.Name
		}
		for _, u := range m.PeerURLs {
			entries = append(entries, name+"="+u)
		}
	}
	sort.Strings(entries)
	return strings.Join(entries, ",")
}

func kvClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("failed to dial %v: %v", endpoints, err)
	}
	return c
}

func status(ctx context.Context, d etcd.Dialer, m *etcdproc.Member) (etcd.EndpointStatus, error) {
	c, err := d.Dial(ctx, []string{m.ClientURL})
	if err != nil {
		return etcd.EndpointStatus{}, err
	}
	defer func() { _ = c.Close() }()
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.Status(callCtx, m.ClientURL)
}

func statusOf(ctx context.Context, t *testing.T, d etcd.Dialer, m *etcdproc.Member) etcd.EndpointStatus {
	t.Helper()
	st, err := status(ctx, d, m)
	if err != nil {
		t.Fatalf("failed to get the status of %s: %v\n%s", m.Name, err, m.LogTail(20))
	}
	return st
}

func listAt(ctx context.Context, d etcd.Dialer, m *etcdproc.Member) (etcd.MemberList, error) {
	c, err := d.Dial(ctx, []string{m.ClientURL})
	if err != nil {
		return etcd.MemberList{}, err
	}
	defer func() { _ = c.Close() }()
	return c.MemberListAt(ctx, m.ClientURL)
}

func linearizableList(ctx context.Context, d etcd.Dialer, m *etcdproc.Member) (etcd.MemberList, error) {
	c, err := d.Dial(ctx, []string{m.ClientURL})
	if err != nil {
		return etcd.MemberList{}, err
	}
	defer func() { _ = c.Close() }()
	return c.MemberList(ctx)
}
