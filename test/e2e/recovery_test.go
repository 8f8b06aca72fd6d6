//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

const recoveryKeys = 100

// cluster reads the harness's EtcdCluster.
func (h *healHarness) cluster(ctx context.Context) *v1alpha1.EtcdCluster {
	cl := &v1alpha1.EtcdCluster{}
	h.g.Expect(h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl)).To(Succeed())
	return cl
}

// putKeys writes keys through the client Service.
func (h *healHarness) putKeys(ctx context.Context, prefix string, n int) {
	h.t.Helper()
	svc, err := env.ClientServiceEndpoint(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdClient(svc)
	h.g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	h.g.Expect(framework.PutKeys(ctx, cli, prefix, n)).To(Succeed())
}

// expectKeysEverywhere reads every key of prefix from every member directly.
func (h *healHarness) expectKeysEverywhere(ctx context.Context, prefix string, n, members int) {
	h.t.Helper()
	eps, err := env.MemberEndpoints(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(eps).To(HaveLen(members))
	for _, ep := range eps {
		h.g.Expect(framework.CheckKeys(ctx, ep, prefix, n)).To(Succeed())
	}
}

// loseDataDirs wipes the named members' data dirs with the operator
// stopped, so that self-heal cannot act on the first before the others
// break, and restarts their etcd on the empty dirs. Every victim is checked
// to be a healthy voter first, all of them before any fault: once some have
// lost their data the quorum may be gone, and the rest follow no leader.
// The operator is started again, with as many replicas as it had, before it
// returns; whatever fails, the deferred scale-up leaves it running for the
// tests after.
func (h *healHarness) loseDataDirs(ctx context.Context, before func(), victims ...v1alpha1.EtcdMember) {
	h.t.Helper()
	for _, m := range victims {
		h.expectHealthyVoter(ctx, m)
	}
	replicas, err := env.OperatorReplicas(ctx)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(env.ScaleOperator(ctx, h.t, 0)).To(Succeed())
	started := false
	defer func() {
		if !started {
			h.g.Expect(env.ScaleOperator(context.Background(), h.t, replicas)).To(Succeed())
		}
	}()
	if before != nil {
		before()
	}
	for _, m := range victims {
		h.g.Expect(env.LoseDataDir(ctx, h.ns, m.Name)).To(Succeed())
	}
	h.g.Expect(env.ScaleOperator(ctx, h.t, replicas)).To(Succeed())
	started = true
}

// waitQuorumLost waits for the QuorumLost condition to be True, the
// quorum lost for good, with every named member among the survivors.
func (h *healHarness) waitQuorumLost(ctx context.Context, survivors ...string) *v1alpha1.EtcdCluster {
	h.t.Helper()
	var cl *v1alpha1.EtcdCluster
	h.g.Expect(framework.WaitFor(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		cl = &v1alpha1.EtcdCluster{}
		if err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.name}, cl); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.QuorumLostCondition)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.MembersGoneReason || cl.Status.QuorumLoss == nil {
			return false, nil
		}
		left := map[string]bool{}
		for _, s := range cl.Status.QuorumLoss.Survivors {
			left[s.Name] = s.Revision > 0
		}
		for _, s := range survivors {
			if !left[s] {
				return false, nil
			}
		}
		return true, nil
	})).To(Succeed(), "QuorumLost=True/MembersGone with survivors %v", survivors)
	return cl
}

// survivorReport is what status.quorumLoss says of one survivor.
func survivorReport(cl *v1alpha1.EtcdCluster, name string) v1alpha1.SurvivorReport {
	for _, s := range cl.Status.QuorumLoss.Survivors {
		if s.Name == name {
			return s
		}
	}
	return v1alpha1.SurvivorReport{}
}

// expectUnchanged watches the members for a while: with the quorum lost
// for good and no recovery asked for, nothing is deleted or added.
func (h *healHarness) expectUnchanged(ctx context.Context, want []string) {
	h.t.Helper()
	h.g.Consistently(func() []string {
		var live []string
		for _, m := range h.members(ctx) {
			if m.DeletionTimestamp.IsZero() {
				live = append(live, m.Name)
			}
		}
		return live
	}, 20*time.Second, time.Second).Should(ConsistOf(want))
	for _, m := range h.members(ctx) {
		h.g.Expect(m.Spec.ForceNewCluster).To(BeFalse(), "nothing is forced without an EtcdRecovery")
	}
}

// askRecovery creates an EtcdRecovery and waits for the operator to plan or
// refuse it.
func (h *healHarness) askRecovery(ctx context.Context, name string, spec v1alpha1.EtcdRecoverySpec) *v1alpha1.EtcdRecovery {
	h.t.Helper()
	spec.ClusterName = h.name
	er := &v1alpha1.EtcdRecovery{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns}, Spec: spec}
	h.g.Expect(h.c.Create(ctx, er)).To(Succeed())
	h.g.Expect(framework.WaitFor(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(er), er); err != nil {
			return false, err
		}
		return er.Status.Phase != "" && er.Status.Phase != v1alpha1.RecoveryPending, nil
	})).To(Succeed(), "the operator plans or refuses EtcdRecovery %s", name)
	return er
}

func (h *healHarness) expectRefused(er *v1alpha1.EtcdRecovery, reason, message string) {
	h.t.Helper()
	h.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRefused))
	cond := meta.FindStatusCondition(er.Status.Conditions, v1alpha1.RecoveryPlannedCondition)
	h.g.Expect(cond).NotTo(BeNil())
	h.g.Expect(cond.Reason).To(Equal(reason))
	h.g.Expect(cond.Message).To(ContainSubstring(message))
	h.g.Expect(er.Status.Plan).To(BeNil(), "nothing is planned, nothing changes")
}

// buildPlugin builds kubectl-etcd into a directory to put on PATH.
func buildPlugin(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, "kubectl-etcd"), "./cmd/kubectl-etcd")
	build.Dir = env.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("failed to build kubectl-etcd: %v\n%s", err, out)
	}
	return bin
}

// TestRecoverFromASurvivor is the first acceptance test: two of three
// members lose their data dirs while the operator is stopped; the operator,
// started again, reports the quorum lost and changes nothing; kubectl etcd
// recover --from-survivor brings the cluster back to 3 members with every
// key the survivor had, under the same cluster ID.
func TestRecoverFromASurvivor(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "dr-survivor", nil)
	defer func() {
		if t.Failed() {
			env.DumpNamespace(t, h.ns)
		}
	}()
	h.putKeys(ctx, "dr", recoveryKeys)
	clusterID := h.cluster(ctx).Status.ClusterID
	survivor := h.pick(ctx, true)
	first := h.pick(ctx, false)
	second := h.pick(ctx, false, first.Name)
	before := names(h.members(ctx))

	h.loseDataDirs(ctx, nil, first, second)
	cl := h.waitQuorumLost(ctx, survivor.Name)
	cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.QuorumLostCondition)
	h.g.Expect(cond.Message).To(ContainSubstring(first.Name + " (DataDirLost"))
	h.g.Expect(cond.Message).To(ContainSubstring(second.Name + " (DataDirLost"))
	h.g.Expect(cond.Message).To(ContainSubstring("left: " + survivor.Name))
	h.g.Expect(survivorReport(cl, survivor.Name).Revision).To(BeNumerically(">", recoveryKeys))
	h.g.Expect(cl.Status.QuorumLoss.Gone).To(HaveLen(2))
	h.expectEvent(ctx, v1alpha1.QuorumLostCondition, first.Name)
	h.expectUnchanged(ctx, before)

	plugin := buildPlugin(ctx, t)
	out, err := runPlugin(ctx, t, plugin, "recover", h.name, "-n", h.ns, "--from-survivor")
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(out).To(ContainSubstring("Plan, recorded before anything changes"))
	h.g.Expect(out).To(ContainSubstring("from:      member " + survivor.Name))
	h.g.Expect(out).To(ContainSubstring("is Ready with 3 members"))

	cl, err = framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 5*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(cl.Status.Members).To(HaveLen(3))
	h.g.Expect(cl.Status.ClusterID).To(Equal(clusterID), "the cluster ID is kept")
	ids := map[string]string{}
	for _, m := range cl.Status.Members {
		ids[m.Name] = m.ID
	}
	h.g.Expect(ids).To(HaveKeyWithValue(survivor.Name, survivor.Status.MemberID), "the survivor keeps its member ID")
	h.g.Expect(ids).NotTo(HaveKey(first.Name))
	h.g.Expect(ids).NotTo(HaveKey(second.Name))
	h.expectKeysEverywhere(ctx, "dr", recoveryKeys, 3)
	h.expectSentinelEverywhere(ctx)
	for _, m := range h.members(ctx) {
		h.g.Expect(m.Spec.ForceNewCluster).To(BeFalse(), "no later restart forces again")
	}

	var recs v1alpha1.EtcdRecoveryList
	h.g.Expect(h.c.List(ctx, &recs, client.InNamespace(h.ns))).To(Succeed())
	h.g.Expect(recs.Items).To(HaveLen(1))
	er := recs.Items[0]
	h.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoverySucceeded))
	h.g.Expect(er.Status.Plan.Survivor).To(Equal(survivor.Name))
	h.g.Expect(er.Status.Plan.Removed).To(ConsistOf(first.Name, second.Name))
	h.g.Eventually(func() *v1alpha1.ClusterRecovery { return h.cluster(ctx).Status.Recovery }, 30*time.Second, 500*time.Millisecond).
		Should(BeNil(), "forgotten once its EtcdRecovery recorded the outcome")
	cond = meta.FindStatusCondition(h.cluster(ctx).Status.Conditions, v1alpha1.QuorumLostCondition)
	h.g.Expect(cond.Reason).To(Equal(v1alpha1.QuorumHeldReason))
	h.putKeys(ctx, "after", 10)
}

// runPlugin runs kubectl etcd with the plugin built into dir on PATH.
func runPlugin(ctx context.Context, t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, env.KubectlPath, append([]string{"etcd"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	t.Logf("kubectl etcd %s:\n%s", strings.Join(args, " "), out)
	return string(out), err
}

// TestRecoverFromASnapshot is the second acceptance test: the same
// fault as TestRecoverFromASurvivor, recovered from a snapshot taken before
// it. Every key of the snapshot is on every member, none written after it,
// the revision is bumped past anything a client saw, old watches are told
// they were compacted, and the cluster has a new cluster ID.
func TestRecoverFromASnapshot(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "dr-snapshot", nil)
	defer func() {
		if t.Failed() {
			env.DumpNamespace(t, h.ns)
		}
	}()
	// The serial tests before this one stop and wipe nodes, the S3
	// server's among them.
	h.g.Expect(env.EnsureS3Bucket(ctx)).To(Succeed(), "the local cluster's S3 server answers")
	h.g.Expect(env.CopyS3Credentials(ctx, h.ns)).To(Succeed())
	h.putKeys(ctx, "dr", recoveryKeys)
	old := h.cluster(ctx)
	h.g.Expect(h.c.Create(ctx, &v1alpha1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: h.ns},
		Spec:       v1alpha1.EtcdSnapshotSpec{ClusterName: h.name, Destination: framework.S3Destination("e2e/" + h.ns + "/")},
	})).To(Succeed())
	snap, err := framework.WaitForSnapshot(ctx, h.c, h.ns, "before", 10*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(snap.Status.Phase).To(Equal(v1alpha1.SnapshotSucceeded))
	h.putKeys(ctx, "later", 20)

	survivor := h.pick(ctx, true)
	first := h.pick(ctx, false)
	second := h.pick(ctx, false, first.Name)
	h.loseDataDirs(ctx, nil, first, second)
	h.waitQuorumLost(ctx, survivor.Name)

	plugin := buildPlugin(ctx, t)
	out, err := runPlugin(ctx, t, plugin, "recover", h.name, "-n", h.ns, "--from-snapshot", "--max-age", "1h")
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(out).To(ContainSubstring(fmt.Sprintf("from:      EtcdSnapshot before, revision %d", snap.Status.Revision)))
	h.g.Expect(out).To(ContainSubstring("new cluster ID in place of " + old.Status.ClusterID))
	h.g.Expect(out).To(ContainSubstring("is Ready with 3 members"))

	cl, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 5*time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(cl.Status.Members).To(HaveLen(3))
	h.g.Expect(cl.Status.ClusterID).NotTo(Equal(old.Status.ClusterID), "the cluster's identity changes")
	h.g.Expect(cl.Status.ClusterToken).NotTo(Equal(old.Status.ClusterToken))
	h.g.Expect(cl.Status.RestoredFrom).NotTo(BeNil())
	h.g.Expect(cl.Status.RestoredFrom.SnapshotName).To(Equal("before"))
	for _, m := range cl.Status.Members {
		for _, o := range old.Status.Members {
			h.g.Expect(m.Name).NotTo(Equal(o.Name), "no member of the old cluster is kept")
		}
	}
	h.expectKeysEverywhere(ctx, "dr", recoveryKeys, 3)
	h.expectKeysEverywhere(ctx, "later", 0, 3)
	h.expectSentinelEverywhere(ctx)

	svc, err := env.ClientServiceEndpoint(ctx, h.ns, h.name)
	h.g.Expect(err).NotTo(HaveOccurred())
	cli, err := framework.EtcdClient(svc)
	h.g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	resp, err := cli.Get(ctx, sentinelKey)
	h.g.Expect(err).NotTo(HaveOccurred())
	h.g.Expect(resp.Header.Revision).To(BeNumerically(">=", snap.Status.Revision+v1alpha1.DefaultBumpRevision), "the revision is bumped")
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	w, ok := <-cli.Watch(wctx, "dr/", clientv3.WithPrefix(), clientv3.WithRev(snap.Status.Revision))
	wcancel()
	h.g.Expect(ok).To(BeTrue())
	h.g.Expect(w.CompactRevision).To(BeNumerically(">", 0), "a watch from before the recovery is told it was compacted")

	var recs v1alpha1.EtcdRecoveryList
	h.g.Expect(h.c.List(ctx, &recs, client.InNamespace(h.ns))).To(Succeed())
	h.g.Expect(recs.Items).To(HaveLen(1))
	h.g.Expect(recs.Items[0].Status.Phase).To(Equal(v1alpha1.RecoverySucceeded))
	h.g.Expect(recs.Items[0].Status.Plan.Snapshot).To(Equal("before"))
	cond := meta.FindStatusCondition(recs.Items[0].Status.Conditions, v1alpha1.RecoveredCondition)
	h.g.Expect(cond.Message).To(ContainSubstring("The cluster ID was " + old.Status.ClusterID))
	h.putKeys(ctx, "after", 10)
}

// TestRecoveryRefusedWhileAQuorumAnswers is the first half of the issue's
// third acceptance test: a recovery asked for while a quorum answers is
// refused with its message and changes nothing. Nothing is stopped for it,
// so it runs in parallel; the other half, TestRecoveryRefusals, stops the
// operator.
func TestRecoveryRefusedWhileAQuorumAnswers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := newHealCluster(ctx, t, "dr-quorum", nil)
	defer func() {
		if t.Failed() {
			env.DumpNamespace(t, h.ns)
		}
	}()
	before := names(h.members(ctx))
	er := h.askRecovery(ctx, "needless", v1alpha1.EtcdRecoverySpec{
		Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{}}, Force: true})
	h.expectRefused(er, v1alpha1.QuorumReachableReason, "3 of 3 voters answer with a leader, a quorum: EtcdCluster dr-quorum needs no recovery")
	h.expectEvent(ctx, v1alpha1.QuorumReachableReason, "needs no recovery")
	h.expectUnchanged(ctx, before)
	_, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, time.Minute)
	h.g.Expect(err).NotTo(HaveOccurred())
}

// TestRecoveryRefusals is the second half of the third acceptance
// test: a recovery from a survivor that is behind another is refused with
// its message and changes nothing. It needs two survivors at different
// revisions, so it uses five members: one survivor's Pod is deleted with the
// operator stopped (so nobody re-creates it), keys are written to the four
// left, three data dirs are wiped, and the operator brings the lagging survivor's Pod back on its old data.
// Without a quorum that member never serves clients, so the operator reads
// where it stands from its metrics endpoint. Recovering without naming a
// survivor then takes the one ahead.
func TestRecoveryRefusals(t *testing.T) {
	framework.Serial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	t.Run("a survivor behind another", func(t *testing.T) {
		h := newHealCluster(ctx, t, "dr-behind", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](5) })
		defer func() {
			if t.Failed() {
				env.DumpNamespace(t, h.ns)
			}
		}()
		h.putKeys(ctx, "early", 20)
		all := h.members(ctx)
		lagging, ahead := all[0], all[1]
		victims := all[2:]
		// The survivors too: the lagging one's Pod is deleted, a fault as
		// well, and the late writes must reach the one ahead.
		h.expectHealthyVoter(ctx, lagging)
		h.expectHealthyVoter(ctx, ahead)
		h.loseDataDirs(ctx, func() {
			// Stopped for good while the operator is: its Pod is the
			// member controller's to re-create.
			h.g.Expect(env.Clientset.CoreV1().Pods(h.ns).Delete(ctx, lagging.Name, metav1.DeleteOptions{})).To(Succeed())
			h.g.Expect(framework.WaitFor(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
				pods, err := env.MemberPods(ctx, h.ns, h.name)
				return err == nil && pods[lagging.Name] == nil, err
			})).To(Succeed())
			h.putKeys(ctx, "late", 50)
		}, victims...)
		cl := h.waitQuorumLost(ctx, lagging.Name, ahead.Name)
		behind, front := survivorReport(cl, lagging.Name), survivorReport(cl, ahead.Name)
		h.g.Expect(front.Revision).To(BeNumerically(">=", behind.Revision+50), "the late writes reached only %s", ahead.Name)
		cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.QuorumLostCondition)
		h.g.Expect(cond.Message).To(ContainSubstring(lagging.Name+" (raft index"), "the lagging member is among those left")
		claims := h.claimUIDs(ctx, lagging.Name, ahead.Name)

		er := h.askRecovery(ctx, "from-behind", v1alpha1.EtcdRecoverySpec{
			Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{Member: lagging.Name}}})
		h.expectRefused(er, v1alpha1.SurvivorBehindReason,
			fmt.Sprintf("member %s is behind member %s", lagging.Name, ahead.Name))
		h.expectEvent(ctx, v1alpha1.SurvivorBehindReason, lagging.Name)
		h.expectUnchanged(ctx, names(all))
		h.g.Expect(h.claimUIDs(ctx, lagging.Name, ahead.Name)).To(Equal(claims), "the survivors keep their volumes")
		cl = h.waitQuorumLost(ctx, lagging.Name, ahead.Name)
		h.g.Expect(survivorReport(cl, lagging.Name).Revision).To(Equal(behind.Revision), "the refusal left %s's data as it was", lagging.Name)
		h.g.Expect(survivorReport(cl, ahead.Name).Revision).To(Equal(front.Revision), "the refusal left %s's data as it was", ahead.Name)

		er = h.askRecovery(ctx, "from-the-best", v1alpha1.EtcdRecoverySpec{
			Source: v1alpha1.RecoverySource{Survivor: &v1alpha1.SurvivorSource{}}})
		h.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoveryRunning))
		h.g.Expect(er.Status.Plan.Survivor).To(Equal(ahead.Name), "the survivor furthest ahead")
		h.g.Expect(er.Status.Plan.Removed).To(ContainElement(lagging.Name))
		h.g.Expect(er.Status.Plan.Removed).NotTo(ContainElement(ahead.Name))
		h.g.Expect(framework.WaitFor(ctx, 10*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
			if err := h.c.Get(ctx, client.ObjectKeyFromObject(er), er); err != nil {
				return false, err
			}
			return er.Status.Phase.Terminal(), nil
		})).To(Succeed())
		h.g.Expect(er.Status.Phase).To(Equal(v1alpha1.RecoverySucceeded))
		_, err := framework.WaitForClusterReady(ctx, h.c, h.ns, h.name, 10*time.Minute)
		h.g.Expect(err).NotTo(HaveOccurred())
		h.expectKeysEverywhere(ctx, "early", 20, 5)
		h.expectKeysEverywhere(ctx, "late", 50, 5)
	})
}

// claimUIDs are the UIDs of the named members' data volume claims: a claim
// deleted and made again has a new one.
func (h *healHarness) claimUIDs(ctx context.Context, members ...string) map[string]types.UID {
	h.t.Helper()
	out := map[string]types.UID{}
	for _, m := range members {
		pvc, err := env.Clientset.CoreV1().PersistentVolumeClaims(h.ns).Get(ctx, v1alpha1.DataVolumeClaimName(m), metav1.GetOptions{})
		h.g.Expect(err).NotTo(HaveOccurred())
		out[m] = pvc.UID
	}
	return out
}
