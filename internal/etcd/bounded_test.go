package etcd_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// overBound is past MaxReplyBytes but under gRPC's own 4 MiB default, so
// only the operator's bound can refuse it.
const overBound = etcd.MaxReplyBytes + 512<<10

// bloatedMember is a gRPC server speaking etcd's Cluster API whose member
// list carries a member name of overBound bytes: what an image a user chose
// could answer.
type bloatedMember struct {
	pb.UnimplementedClusterServer
}

func (bloatedMember) MemberList(context.Context, *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	return &pb.MemberListResponse{
		Header:  &pb.ResponseHeader{ClusterId: 1, MemberId: 1},
		Members: []*pb.Member{{ID: 1, Name: strings.Repeat("x", overBound)}},
	}, nil
}

func serveBloated(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("failed to listen: %v", err)
	}
	srv := grpc.NewServer()
	pb.RegisterClusterServer(srv, bloatedMember{})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return "http://" + l.Addr().String()
}

// Both ways the package reaches a member refuse a reply over the bound:
// clientv3's balanced connection, and the single-endpoint connections the
// package dials itself, which do not take clientv3's call options.
func TestReplyOverTheBoundIsReplyTooLarge(t *testing.T) {
	g := NewWithT(t)
	ep := serveBloated(t)
	c := dial(t, []string{ep})

	_, err := c.MemberList(testCtx(t))
	expectCallError(g, err, etcd.OpMemberList, "")
	g.Expect(etcd.IsReplyTooLarge(err)).To(BeTrue(), "balanced: %v", err)
	g.Expect(etcd.IsUnavailable(err)).To(BeFalse(), "a member that answers too much is not unreachable")
	var tl *etcd.ReplyTooLargeError
	g.Expect(errors.As(err, &tl)).To(BeTrue())
	g.Expect(tl.What).To(Equal(etcd.OpMemberList))
	g.Expect(tl.Limit).To(Equal(etcd.MaxReplyBytes))

	_, err = c.MemberListAt(testCtx(t), ep)
	expectCallError(g, err, etcd.OpMemberListAt, ep)
	g.Expect(etcd.IsReplyTooLarge(err)).To(BeTrue(), "single endpoint: %v", err)
}

// Health counts the health key instead of reading it, so a value stored
// under it, however large, never comes back.
func TestHealthDoesNotReadTheHealthKeysValue(t *testing.T) {
	g := NewWithT(t)
	m := newMember(t, "m0")
	m.start(t, memberOpts{maxRequestBytes: overBound + 1<<20})
	raw, err := clientv3.New(clientv3.Config{
		Endpoints:          []string{m.clientURL},
		DialTimeout:        5 * time.Second,
		Logger:             zap.NewNop(),
		MaxCallSendMsgSize: overBound + 1<<20,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = raw.Close() })
	_, err = raw.Put(testCtx(t), "health", strings.Repeat("v", overBound))
	g.Expect(err).NotTo(HaveOccurred())

	c := dial(t, []string{m.clientURL})
	g.Expect(c.Health(testCtx(t), m.clientURL)).To(Succeed())
}

func TestIsReplyTooLargeTellsEtcdsOwnResourceExhaustedApart(t *testing.T) {
	g := NewWithT(t)
	g.Expect(etcd.IsReplyTooLarge(status.Error(codes.ResourceExhausted, "grpc: received message larger than max (3 vs. 2)"))).To(BeTrue())
	for _, err := range []error{rpctypes.ErrGRPCNoSpace, rpctypes.ErrGRPCRequestTooManyRequests, rpctypes.ErrNoSpace, rpctypes.ErrTooManyRequests} {
		g.Expect(etcd.IsReplyTooLarge(err)).To(BeFalse(), "%v", err)
		g.Expect(etcd.IsReplyTooLarge(clientv3.ContextError(context.Background(), err))).To(BeFalse(), "%v", err)
	}
	g.Expect(etcd.IsReplyTooLarge(nil)).To(BeFalse())
}

// A metrics page over MaxMetricsBytes is refused whole with a
// *ReplyTooLargeError, not parsed as far as it was read.
func TestMetricsPageOverTheBound(t *testing.T) {
	g := NewWithT(t)
	// Valid text format all the way, so only the bound can refuse it.
	line := "# HELP filler a line that repeats\n"
	page := strings.Repeat(line, etcd.MaxMetricsBytes/len(line)+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)

	_, err := etcd.NewMetricsReader(nil).SelfReport(testCtx(t), srv.URL)
	expectCallError(g, err, etcd.OpMetrics, srv.URL)
	g.Expect(etcd.IsReplyTooLarge(err)).To(BeTrue(), "%v", err)
	var tl *etcd.ReplyTooLargeError
	g.Expect(errors.As(err, &tl)).To(BeTrue())
	g.Expect(tl.Limit).To(Equal(etcd.MaxMetricsBytes))
	g.Expect(errors.Is(err, etcd.ErrMetricMissing)).To(BeFalse(), "the page was not parsed")
}
