//go:build integration

package etcd_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

// blackHole accepts connections and never answers: what a member behind a
// NetworkPolicy that drops its packets looks like once past the handshake,
// and worse than one that refuses, since nothing fails fast. Each accepted
// connection is reported on closed when its peer closes it.
func blackHole(t *testing.T) (url string, closed <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("failed to listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	done := make(chan struct{}, 16)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				// Read and drop; a read error is the peer going away.
				_, _ = io.Copy(io.Discard, conn)
				done <- struct{}{}
			}()
		}
	}()
	return "http://" + l.Addr().String(), done
}

// A pass asks every member for its member list at once: a member that
// never answers, listed first, does not hold up the answer of one that
// does. The client's own per-call timeout is set past the caller's
// deadline, so asked in turn the silent member would use up all of it and
// the call would fail; asked together, the live member answers well
// inside it, and the silent member's ask is cancelled.
func TestFirstMemberListAnswersPastABlackHole(t *testing.T) {
	g := NewWithT(t)
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{Members: 1})
	hole, closed := blackHole(t)
	eps := []string{hole, members[0].ClientURL}

	c, err := etcd.NewDialer(etcd.WithCallTimeout(time.Hour)).Dial(context.Background(), eps)
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, ep, err := etcd.FirstMemberList(ctx, c, eps)
	g.Expect(err).NotTo(HaveOccurred(), "the live member answers before the caller's deadline")
	g.Expect(ep).To(Equal(members[0].ClientURL))
	g.Expect(list.Members).To(HaveLen(1))
	g.Expect(list.Members[0].ClientURLs).To(ConsistOf(members[0].ClientURL))
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "answered within the deadline")
	g.Eventually(closed, 10*time.Second).Should(Receive(), "the ask of the black hole was made, and is cancelled on return")
}
