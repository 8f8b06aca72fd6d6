package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// healthyWorld is cluster demo: voters demo-a, demo-b (the leader, with a
// big database) and demo-c (with a NOSPACE alarm), and a started learner
// demo-d.
func healthyWorld(t *testing.T) *world {
	w := newWorld(t)
	w.cluster("demo")
	w.voter("demo", "demo-a")
	b := w.voter("demo", "demo-b")
	w.voter("demo", "demo-c")
	w.learner("demo", "demo-d", true)
	w.etcd.SetLeader(b.ID)
	w.etcd.SetStatus(w.endpoint("demo-b"), etcd.EndpointStatus{
		Endpoint: w.endpoint("demo-b"), MemberID: b.ID, ClusterID: etcdfake.DefaultClusterID, LeaderID: b.ID,
		RaftTerm: 2, RaftIndex: 1234, DBSize: 3758096384, DBSizeInUse: 1288490188, Version: "3.6.16",
	})
	w.etcd.RaiseAlarm(etcd.Alarm{MemberID: w.members["demo-c"].ID, Type: etcd.AlarmNoSpace})
	return w
}

func golden(w *world, s string) string {
	for _, name := range []string{"demo-a", "demo-b", "demo-c", "demo-d"} {
		s = strings.ReplaceAll(s, "<"+name+">", w.id(name))
	}
	return strings.ReplaceAll(s, "<cluster>", etcd.FormatMemberID(etcdfake.DefaultClusterID))
}

func TestStatusTable(t *testing.T) {
	g := NewWithT(t)
	w := healthyWorld(t)
	// The operator reports demo-a on the target template.
	w.objs[0].(*v1alpha1.EtcdCluster).Status.Members = []v1alpha1.MemberSummary{{Name: "demo-a", Updated: true}}
	r := w.run("status", "demo", "-n", testNS)
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.err).To(BeEmpty())
	g.Expect(r.out).To(Equal(golden(w, `EtcdCluster ns1/demo, cluster ID <cluster>, leader demo-b
NAME     ID                 ROLE      LEADER   VERSION   UPDATED   DB SIZE   DB IN USE   RAFT TERM   RAFT INDEX   ALARMS    POD READY   ERROR
demo-a   <demo-a>   voter     no       3.7.3     yes       1.0 MiB   512.0 KiB   2           1            -         true        -
demo-b   <demo-b>   voter     yes      3.6.16    no        3.5 GiB   1.2 GiB     2           1234         -         true        -
demo-c   <demo-c>   voter     no       3.7.3     no        1.0 MiB   512.0 KiB   2           1            NOSPACE   true        -
demo-d   <demo-d>   learner   no       3.7.3     no        1.0 MiB   512.0 KiB   2           1            -         true        -
`)))
	g.Expect(w.flags).To(Equal([]KubeFlags{{Namespace: testNS}}))
	// Every call went to a tunnel; etcd's advertised URLs were never dialed.
	for _, call := range w.etcd.Calls {
		for _, ep := range append(call.Endpoints, call.Endpoint) {
			if ep != "" {
				g.Expect(ep).To(HavePrefix("http://127.0.0.1:"), "call %+v", call)
			}
		}
	}
}

func TestStatusMarksMembersItCannotSee(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	w.voter("demo", "demo-a")
	w.voter("demo", "demo-b")
	w.voter("demo", "demo-c")
	w.learner("demo", "demo-d", false) // added, Pod still Pending
	w.etcd.SetEndpointError(w.endpoint("demo-b"), etcdfake.ErrUnreachable)
	w.fwd.errs["demo-c"] = apierrors.NewInternalError(errString("kubelet did not answer"))

	r := w.run("status", "demo")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.out).To(Equal(golden(w, `EtcdCluster ns1/demo, cluster ID <cluster>, leader demo-a
NAME     ID                 ROLE      LEADER   VERSION   UPDATED   DB SIZE   DB IN USE   RAFT TERM   RAFT INDEX   ALARMS   POD READY   ERROR
demo-a   <demo-a>   voter     yes      3.7.3     no        1.0 MiB   512.0 KiB   1           1            -        true        -
demo-b   <demo-b>   voter     no       -         no        -         -           -           -            -        true        unreachable
demo-c   <demo-c>   voter     no       -         no        -         -           -           -            -        true        port-forward failed
demo-d   <demo-d>   learner   no       -         no        -         -           -           -            -        false       Pod not running
`)))
	g.Expect(r.err).To(HavePrefix("error: not every member could be seen:\n"))
	g.Expect(r.err).To(ContainSubstring("EtcdCluster ns1/demo member demo-b: unreachable: failed to call etcd Status on " + w.endpoint("demo-b")))
	g.Expect(r.err).To(ContainSubstring("EtcdCluster ns1/demo member demo-c: port-forward failed: "))
	g.Expect(r.err).To(ContainSubstring("kubelet did not answer"))
	g.Expect(r.err).To(ContainSubstring("EtcdCluster ns1/demo member demo-d: Pod not running: member Pod demo-d is Pending"))
	g.Expect(r.err).NotTo(ContainSubstring("demo-a"))
}

type errString string

func (e errString) Error() string { return string(e) }

func TestStatusJSONAndYAML(t *testing.T) {
	g := NewWithT(t)
	w := healthyWorld(t)
	r := w.run("status", "-o", "json", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	var report StatusReport
	g.Expect(json.Unmarshal([]byte(r.out), &report)).To(Succeed())
	g.Expect(report.Clusters).To(HaveLen(1))
	cs := report.Clusters[0]
	g.Expect(cs.Name).To(Equal("demo"))
	g.Expect(cs.Namespace).To(Equal(testNS))
	g.Expect(cs.Leader).To(Equal("demo-b"))
	g.Expect(cs.Members).To(HaveLen(4))
	g.Expect(cs.Members[1]).To(Equal(MemberStatus{
		Name: "demo-b", ID: w.id("demo-b"), Role: "voter", Leader: true, Reachable: true,
		Version: "3.6.16", DBSize: 3758096384, DBSizeInUse: 1288490188, RaftTerm: 2, RaftIndex: 1234,
		Alarms: []string{}, PodPhase: "Running", PodReady: true,
	}))
	g.Expect(cs.Members[2].Alarms).To(Equal([]string{etcd.AlarmNoSpace}))
	g.Expect(cs.Members[3].Role).To(Equal("learner"))
	// The field names are the interface; spell a few out.
	for _, key := range []string{`"dbSizeInUse": 1288490188`, `"raftIndex": 1234`, `"podReady": true`, `"alarms": []`, `"clusterID": "` + etcd.FormatMemberID(etcdfake.DefaultClusterID) + `"`} {
		g.Expect(r.out).To(ContainSubstring(key))
	}

	y := w.run("status", "demo", "--output=yaml")
	g.Expect(y.code).To(Equal(ExitOK), y.err)
	g.Expect(y.out).To(HavePrefix("clusters:\n- clusterID: "))
	g.Expect(y.out).To(ContainSubstring("  - alarms: []\n    dbSize: 3758096384\n    dbSizeInUse: 1288490188\n"))
	var fromYAML StatusReport
	g.Expect(yaml.Unmarshal([]byte(y.out), &fromYAML)).To(Succeed())
	g.Expect(fromYAML).To(Equal(report), "yaml and json share one schema")

	bad := w.run("status", "demo", "-o", "wide")
	g.Expect(bad.code).To(Equal(ExitUsage))
	g.Expect(bad.err).To(ContainSubstring(`unknown output format "wide"`))
}

func TestStatusOfEveryCluster(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("alpha")
	w.voter("alpha", "alpha-a")
	w.cluster("paused") // no Pods at all
	w.cluster("zeta")
	w.pod("zeta", "zeta-a", corev1.PodPending, false)
	// A Pod with the cluster label but no member label is not a member.
	w.objs = append(w.objs, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha-backup", Namespace: testNS, Labels: map[string]string{v1alpha1.ClusterLabel: "alpha"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	})

	r := w.run("status")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.out).To(Equal(`EtcdCluster ns1/alpha, cluster ID ` + etcd.FormatMemberID(etcdfake.DefaultClusterID) + `, leader alpha-a
NAME      ID                 ROLE    LEADER   VERSION   UPDATED   DB SIZE   DB IN USE   RAFT TERM   RAFT INDEX   ALARMS   POD READY   ERROR
alpha-a   ` + w.id("alpha-a") + `   voter   yes      3.7.3     no        1.0 MiB   512.0 KiB   1           1            -        true        -

EtcdCluster ns1/paused
error: no running member Pods of EtcdCluster paused in namespace ns1 (0 Pods with label etcd.quorumctl.io/cluster=paused, none Running)

EtcdCluster ns1/zeta
error: no running member Pods of EtcdCluster zeta in namespace ns1 (1 Pods with label etcd.quorumctl.io/cluster=zeta, none Running)
`))
	g.Expect(r.err).To(ContainSubstring("EtcdCluster ns1/paused: no running member Pods"))
	g.Expect(r.err).To(ContainSubstring("EtcdCluster ns1/zeta: no running member Pods"))
	g.Expect(w.fwd.forwarded).To(Equal([]string{testNS + "/alpha-a"}), "only running Pods are forwarded to")
}

func TestStatusWithoutClusters(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	r := w.run("status")
	g.Expect(r.code).To(Equal(ExitOK))
	g.Expect(r.out).To(Equal("No EtcdClusters found in namespace ns1.\n"))

	r = w.run("status", "-o", "json")
	g.Expect(r.code).To(Equal(ExitOK))
	g.Expect(r.out).To(Equal("{\n  \"clusters\": []\n}\n"))
}

func TestKubernetesErrors(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(w *world)
		args    []string
		cluster string // what connect is called with, to check the error type
		message string
		check   func(error) bool
	}{
		{
			name:    "cluster not found",
			setup:   func(*world) {},
			args:    []string{"status", "nope"},
			message: "EtcdCluster nope not found in namespace ns1",
			check:   apierrors.IsNotFound,
		},
		{
			name: "get etcdclusters forbidden",
			setup: func(w *world) {
				w.funcs.Get = func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return forbidden("etcdclusters.etcd.quorumctl.io", "demo")
				}
			},
			args: []string{"members", "demo"}, cluster: "demo",
			message: `forbidden to get EtcdCluster demo in namespace ns1: RBAC must allow verb "get" on resource "etcdclusters.etcd.quorumctl.io"`,
			check:   apierrors.IsForbidden,
		},
		{
			name: "list etcdclusters forbidden",
			setup: func(w *world) {
				w.funcs.List = func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return forbidden("etcdclusters.etcd.quorumctl.io", "")
				}
			},
			args:    []string{"status"},
			message: `forbidden to list EtcdClusters in namespace ns1: RBAC must allow verb "list" on resource "etcdclusters.etcd.quorumctl.io"`,
			check:   apierrors.IsForbidden,
		},
		{
			name: "list pods forbidden",
			setup: func(w *world) {
				w.funcs.List = func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					if _, ok := l.(*corev1.PodList); ok {
						return forbidden("pods", "")
					}
					return c.List(ctx, l, opts...)
				}
			},
			args: []string{"defrag", "demo"}, cluster: "demo",
			message: `forbidden to list the member Pods of EtcdCluster demo in namespace ns1: RBAC must allow verb "list" on resource "pods"`,
			check:   apierrors.IsForbidden,
		},
		{
			name:  "port-forward forbidden",
			setup: func(w *world) { w.fwd.errs["demo-b"] = forbidden("pods/portforward", "demo-b") },
			args:  []string{"alarms", "list", "demo"}, cluster: "demo",
			message: `forbidden to create a port-forward to Pod demo-b in namespace ns1: RBAC must allow verb "create" on resource "pods/portforward"`,
			check:   apierrors.IsForbidden,
		},
		{
			name: "no running Pods",
			setup: func(w *world) {
				w.cluster("idle")
				w.pod("idle", "idle-a", corev1.PodFailed, false)
			},
			args: []string{"move-leader", "idle", "--to", "idle-a"}, cluster: "idle",
			message: "no running member Pods of EtcdCluster idle in namespace ns1 (1 Pods with label etcd.quorumctl.io/cluster=idle, none Running)",
			check:   func(err error) bool { return err != nil },
		},
		{
			name: "no member reachable",
			setup: func(w *world) {
				for _, p := range []string{"demo-a", "demo-b", "demo-c", "demo-d"} {
					w.fwd.errs[p] = apierrors.NewServiceUnavailable("kubelet is down")
				}
			},
			args: []string{"members", "demo"}, cluster: "demo",
			message: "failed to reach any member of EtcdCluster ns1/demo: ",
			check:   apierrors.IsServiceUnavailable,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := healthyWorld(t)
			tc.setup(w)
			r := w.run(tc.args...)
			g.Expect(r.code).To(Equal(ExitError))
			g.Expect(r.out).To(BeEmpty())
			g.Expect(r.err).To(HavePrefix("error: " + tc.message))

			// The same failure keeps its type for callers that classify it.
			env := w.env()
			var err error
			if tc.cluster == "" {
				err = runStatus(context.Background(), env, &strings.Builder{}, OutputTable, tc.args[1:])
			} else {
				_, err = env.connect(context.Background(), tc.cluster)
			}
			g.Expect(tc.check(err)).To(BeTrue(), "unclassified: %v", err)
			g.Expect(w.etcd.Defragmented).To(BeEmpty())
		})
	}
}

func TestMemberName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(memberName(etcd.Member{Name: "demo-x"}, "demo")).To(Equal("demo-x"))
	g.Expect(memberName(etcd.Member{PeerURLs: []string{peerURL("demo", "demo-y")}}, "demo")).To(Equal("demo-y"))
	g.Expect(memberName(etcd.Member{PeerURLs: []string{"http://demo-y.other.ns1.svc:2380"}}, "demo")).To(BeEmpty(), "another cluster's peer Service")
	g.Expect(memberName(etcd.Member{PeerURLs: []string{"http://10.0.0.1:2380"}}, "demo")).To(BeEmpty())
	g.Expect(memberName(etcd.Member{}, "demo")).To(BeEmpty())
}

func TestHumanBytes(t *testing.T) {
	g := NewWithT(t)
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		8 << 20: "8.0 MiB", 2 << 30: "2.0 GiB", 3 << 40: "3.0 TiB",
	} {
		g.Expect(humanBytes(n)).To(Equal(want), "%d", n)
	}
}
