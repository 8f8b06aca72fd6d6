package runner

import (
	"context"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/chaos"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

// memberSelector selects what the operator made for the members of one
// cluster: Pods, claims, startup ConfigMaps.
func memberSelector(cluster string) []client.ListOption {
	return []client.ListOption{client.MatchingLabels{v1alpha1.ClusterLabel: cluster}, client.HasLabels{v1alpha1.MemberLabel}}
}

func (r *run) getCluster(ctx context.Context, name string) (*v1alpha1.EtcdCluster, error) {
	cl := &v1alpha1.EtcdCluster{}
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: r.cfg.Namespace, Name: name}, cl); err != nil {
		return nil, err
	}
	return cl, nil
}

func (r *run) listMembers(ctx context.Context, cluster string) ([]v1alpha1.EtcdMember, error) {
	var list v1alpha1.EtcdMemberList
	if err := r.c.List(ctx, &list, client.InNamespace(r.cfg.Namespace), client.MatchingLabels{v1alpha1.ClusterLabel: cluster}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// members are the live members of a cluster with what victim selection
// needs: the seed flag, the node, and whether etcd counts the member as a
// healthy voter.
func (r *run) members(ctx context.Context, cluster string) ([]chaos.MemberInfo, error) {
	list, err := r.listMembers(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var out []chaos.MemberInfo
	var leader uint64
	for i := range list {
		m := &list[i]
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		info := chaos.MemberInfo{Name: m.Name, Seed: m.Spec.Bootstrap}
		if p, err := r.env.Clientset.CoreV1().Pods(r.cfg.Namespace).Get(ctx, m.Name, metav1.GetOptions{}); err == nil {
			info.Node = p.Spec.NodeName
			if leader == 0 && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				leader = r.leaderSeenBy(ctx, p.Status.PodIP)
			}
		}
		if id, err := etcd.ParseMemberID(m.Status.MemberID); err == nil && id == leader {
			info.Leader = true
		}
		if err := r.env.HealthyVoter(ctx, m); err != nil {
			r.cfg.Logf("chaos: %s is no victim now: %v", m.Name, err)
		} else {
			info.Healthy = true
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// leaderSeenBy is the leader the member at ip follows, or 0 if it does not
// answer or follows none. The first member that answers names the leader
// for victim selection; a leader that changes before the fault lands is
// paused as a follower, which the fault's record does not hide: the pick is
// as of the moment before.
func (r *run) leaderSeenBy(ctx context.Context, ip string) uint64 {
	ep := fmt.Sprintf("http://%s:%d", ip, v1alpha1.ClientPort)
	cli, err := framework.EtcdClient(ep)
	if err != nil {
		return 0
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, ep)
	if err != nil {
		return 0
	}
	return st.Leader
}

// memberState is one look at a victim.
func (r *run) memberState(ctx context.Context, name string) (chaos.MemberState, error) {
	s := chaos.MemberState{Name: name}
	m := &v1alpha1.EtcdMember{}
	err := r.c.Get(ctx, types.NamespacedName{Namespace: r.cfg.Namespace, Name: name}, m)
	switch {
	case apierrors.IsNotFound(err):
		return s, nil
	case err != nil:
		return s, err
	}
	s.Exists = m.DeletionTimestamp.IsZero()
	p, err := r.env.Clientset.CoreV1().Pods(r.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return s, nil
	case err != nil:
		return s, err
	}
	s.PodExists, s.PodUID, s.PodDeleting = true, p.UID, p.DeletionTimestamp != nil
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "etcd" {
			s.EtcdReady, s.Restarts = cs.Ready, cs.RestartCount
		}
	}
	return s, nil
}

// observe gathers what the invariants are checked against.
func (r *run) observe(ctx context.Context, cluster string) (chaos.Observation, error) {
	var o chaos.Observation
	cl, err := r.getCluster(ctx, cluster)
	if err != nil {
		return o, err
	}
	o.Cluster = cl
	if o.Members, err = r.listMembers(ctx, cluster); err != nil {
		return o, err
	}
	ns := client.InNamespace(r.cfg.Namespace)
	var pods corev1.PodList
	if err := r.c.List(ctx, &pods, append(memberSelector(cluster), ns)...); err != nil {
		return o, err
	}
	o.Pods = pods.Items
	var claims corev1.PersistentVolumeClaimList
	if err := r.c.List(ctx, &claims, append(memberSelector(cluster), ns)...); err != nil {
		return o, err
	}
	o.Claims = claims.Items
	var cms corev1.ConfigMapList
	if err := r.c.List(ctx, &cms, append(memberSelector(cluster), ns)...); err != nil {
		return o, err
	}
	o.ConfigMaps = cms.Items
	var slices discoveryv1.EndpointSliceList
	if err := r.c.List(ctx, &slices, ns, client.MatchingLabels{discoveryv1.LabelServiceName: v1alpha1.ClientServiceName(cluster)}); err != nil {
		return o, err
	}
	o.Slices = slices.Items
	o.Views = map[string]chaos.EtcdView{}
	for _, m := range o.Members {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		o.Views[m.Name] = r.view(ctx, o.Pods, m.Name)
	}
	return o, nil
}

// view asks one member, on its own endpoint, for its status and its
// serializable member list.
func (r *run) view(ctx context.Context, pods []corev1.Pod, member string) chaos.EtcdView {
	var ip string
	for _, p := range pods {
		if p.Name == member && p.DeletionTimestamp == nil {
			ip = p.Status.PodIP
		}
	}
	if ip == "" {
		return chaos.EtcdView{Err: "no running Pod with an address"}
	}
	ep := fmt.Sprintf("http://%s:%d", ip, v1alpha1.ClientPort)
	cli, err := framework.EtcdClient(ep)
	if err != nil {
		return chaos.EtcdView{Err: err.Error()}
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, ep)
	if err != nil {
		return chaos.EtcdView{Err: err.Error()}
	}
	list, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return chaos.EtcdView{Err: err.Error()}
	}
	v := chaos.EtcdView{ID: st.Header.MemberId, ClusterID: st.Header.ClusterId, Leader: st.Leader, IsLearner: st.IsLearner}
	for _, m := range list.Members {
		v.Members = append(v.Members, chaos.EtcdEntry{Name: m.Name, ID: m.ID, IsLearner: m.IsLearner})
	}
	return v
}
