package framework

import (
	"context"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdClient dials etcd endpoints from the test host. Pod and Service
// addresses of the local cluster are routed to the host, so tests reach
// members directly, one at a time where that matters.
//
// The client pings on its open streams, as the Kubernetes API server's
// does. Without that, a connection whose peer vanished without a word stays
// ready in the client's eyes, and a stream opened on it, such as a watch,
// waits forever for an answer. A node that loses power does that, and so
// does the chaos run's node-stop, which drops the node's packets before it
// kills its processes so that no reset gets out: after one, the run's
// watchers in two clusters started a watch that got no answer for the whole
// minute they were given.
func EtcdClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(etcdConfig(endpoints))
}

func etcdConfig(endpoints []string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		// Above etcd's --grpc-keepalive-min-time (5 s), under which it
		// would take the pings for abuse and end the connection.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	}
}

// PutKeys writes n keys prefix/0000.. with values derived from the key.
func PutKeys(ctx context.Context, c *clientv3.Client, prefix string, n int) error {
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("%s/%04d", prefix, i)
		if _, err := c.Put(ctx, k, "v-"+k); err != nil {
			return fmt.Errorf("put %s: %w", k, err)
		}
	}
	return nil
}

// CheckKeys reads every key written by PutKeys from exactly one member.
func CheckKeys(ctx context.Context, endpoint, prefix string, n int) error {
	c, err := EtcdClient(endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read from %s: %w", endpoint, err)
	}
	if len(resp.Kvs) != n {
		return fmt.Errorf("%s has %d keys under %s, want %d", endpoint, len(resp.Kvs), prefix, n)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) != "v-"+string(kv.Key) {
			return fmt.Errorf("%s: key %s has value %q", endpoint, kv.Key, kv.Value)
		}
	}
	return nil
}

// MemberView is one member's own account of the membership.
type MemberView struct {
	ClusterID uint64
	// Members are "name id learner" strings, sorted, for comparison.
	Members  []string
	Learners int
}

// MemberListAt asks one member, serializably, for its own view.
func MemberListAt(ctx context.Context, endpoint string) (MemberView, error) {
	c, err := EtcdClient(endpoint)
	if err != nil {
		return MemberView{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return MemberView{}, fmt.Errorf("member list at %s: %w", endpoint, err)
	}
	v := MemberView{ClusterID: resp.Header.ClusterId}
	for _, m := range resp.Members {
		v.Members = append(v.Members, fmt.Sprintf("%s %016x learner=%t", m.Name, m.ID, m.IsLearner))
		if m.IsLearner {
			v.Learners++
		}
	}
	sort.Strings(v.Members)
	return v, nil
}
