package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// A test that injects a fault into "a healthy member" must hit one: a
// member whose Pod never ran cannot have its data wiped, and a learner
// stuck on an unschedulable Pod is not the voter the test means to take
// down. What the API says (an EtcdMember, a Pod object) does not tell that
// apart, so a victim is judged by its Pod's state and by etcd itself.

// HealthyVoter says why the member is not a healthy voter, or nil. A healthy
// voter is not being deleted, its Pod is scheduled, running and ready, and
// etcd, asked at the Pod's address, answers as the member the operator
// recorded, follows a leader, reports no error, and lists itself as a voter.
func (e *Env) HealthyVoter(ctx context.Context, m *v1alpha1.EtcdMember) error {
	if !m.DeletionTimestamp.IsZero() {
		return fmt.Errorf("member %s is being deleted", m.Name)
	}
	want, err := etcd.ParseMemberID(m.Status.MemberID)
	if err != nil {
		return fmt.Errorf("member %s has no etcd member ID recorded: %w", m.Name, err)
	}
	p, err := e.Clientset.CoreV1().Pods(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	if err := Injectable(p); err != nil {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	if !PodReady(p) {
		return fmt.Errorf("member %s: pod %s is not ready", m.Name, p.Name)
	}
	if p.Status.PodIP == "" {
		return fmt.Errorf("member %s: pod %s has no address", m.Name, p.Name)
	}
	ep := fmt.Sprintf("http://%s:%d", p.Status.PodIP, v1alpha1.ClientPort)
	kc, err := e.Client()
	if err != nil {
		return err
	}
	// Over TLS when the cluster has it, as its clients would.
	c, err := ClusterClient(ctx, kc, m.Namespace, m.Spec.ClusterName, ep)
	if err != nil {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	defer func() { _ = c.Close() }()
	return askVoter(ctx, c, c.Endpoints()[0], m.Name, want)
}

// askVoter asks the member at ep, and only it, whether it is the voter want
// following a leader.
func askVoter(ctx context.Context, c *clientv3.Client, ep, name string, want uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := c.Status(ctx, ep)
	if err != nil {
		return fmt.Errorf("member %s does not answer at %s: %w", name, ep, err)
	}
	switch {
	case st.Header.MemberId != want:
		return fmt.Errorf("member %s: %s answers as member %x, not %x", name, ep, st.Header.MemberId, want)
	case st.IsLearner:
		return fmt.Errorf("member %s is a learner", name)
	case st.Leader == 0:
		return fmt.Errorf("member %s follows no leader", name)
	case len(st.Errors) > 0:
		return fmt.Errorf("member %s reports errors: %s", name, strings.Join(st.Errors, "; "))
	}
	list, err := c.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return fmt.Errorf("member %s does not list the membership: %w", name, err)
	}
	for _, mem := range list.Members {
		if mem.ID == want {
			if mem.IsLearner {
				return fmt.Errorf("member %s is a learner in its own member list", name)
			}
			return nil
		}
	}
	return fmt.Errorf("member %s is not in its own member list", name)
}

// PickHealthyVoter returns the first of members that accept takes and that
// is a healthy voter (HealthyVoter), or an error that says why each taken
// member is not.
func (e *Env) PickHealthyVoter(ctx context.Context, members []v1alpha1.EtcdMember, accept func(*v1alpha1.EtcdMember) bool) (v1alpha1.EtcdMember, error) {
	var why []error
	for i := range members {
		m := &members[i]
		if accept != nil && !accept(m) {
			continue
		}
		err := e.HealthyVoter(ctx, m)
		if err == nil {
			return *m, nil
		}
		why = append(why, err)
	}
	if len(why) == 0 {
		return v1alpha1.EtcdMember{}, errors.New("no member is a candidate")
	}
	return v1alpha1.EtcdMember{}, fmt.Errorf("no candidate is a healthy voter: %w", errors.Join(why...))
}
