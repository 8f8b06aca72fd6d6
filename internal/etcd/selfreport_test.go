package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A member restarted without a quorum, as etcd 3.6 renders it: the
// committed gauge is still 0, since raft's hard state has not changed.
const restartedMetrics = `# HELP etcd_server_has_leader Whether or not a leader exists. 1 is existence, 0 is not.
# TYPE etcd_server_has_leader gauge
etcd_server_has_leader 0
# TYPE etcd_server_is_learner gauge
etcd_server_is_learner 0
# TYPE etcd_server_id gauge
etcd_server_id{server_id="69ed52fabafe0d7f"} 1
# TYPE etcd_server_proposals_applied_total gauge
etcd_server_proposals_applied_total 12
# TYPE etcd_server_proposals_committed_total gauge
etcd_server_proposals_committed_total 0
# TYPE etcd_debugging_mvcc_current_revision gauge
etcd_debugging_mvcc_current_revision 51
`

func serve(t *testing.T, status int, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSelfReport_ReadsAMemberWithoutAQuorum(t *testing.T) {
	g := NewWithT(t)
	r, err := NewMetricsReader(nil).SelfReport(context.Background(), serve(t, http.StatusOK, restartedMetrics))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r).To(Equal(SelfReport{MemberID: 0x69ed52fabafe0d7f, AppliedIndex: 12, CommittedIndex: 12, Revision: 51}),
		"the committed index is at least the applied one")
	st := r.Status("http://m:2381")
	g.Expect(st.MemberID).To(Equal(r.MemberID))
	g.Expect(st.RaftAppliedIndex).To(Equal(uint64(12)))
	g.Expect(st.Revision).To(Equal(int64(51)))
	g.Expect(st.LeaderID).To(BeZero())
}

func TestSelfReport_Failures(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		missing bool
	}{
		{"not etcd", http.StatusOK, "# TYPE go_goroutines gauge\ngo_goroutines 3\n", true},
		{"no member ID", http.StatusOK, "etcd_server_has_leader 1\netcd_server_is_learner 0\netcd_server_proposals_applied_total 3\netcd_server_proposals_committed_total 3\netcd_debugging_mvcc_current_revision 2\n", true},
		{"an HTTP error", http.StatusServiceUnavailable, "", false},
		{"not metrics", http.StatusOK, "{{{ not the text format", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			url := serve(t, tc.status, tc.body)
			_, err := NewMetricsReader(nil).SelfReport(context.Background(), url)
			g.Expect(err).To(HaveOccurred())
			var ce *CallError
			g.Expect(errors.As(err, &ce)).To(BeTrue())
			g.Expect(ce.Op).To(Equal(OpMetrics))
			g.Expect(ce.Endpoint).To(Equal(url))
			g.Expect(errors.Is(err, ErrMetricMissing)).To(Equal(tc.missing))
		})
	}
}

func TestSelfReport_HonoursItsContext(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewMetricsReader(nil).SelfReport(ctx, serve(t, http.StatusOK, restartedMetrics))
	g.Expect(errors.Is(err, context.Canceled)).To(BeTrue())
}

func TestMetricsURLFor(t *testing.T) {
	g := NewWithT(t)
	u, err := MetricsURLFor("http://m-0.demo-peer.ns.svc.cluster.local:2379", 2381)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u).To(Equal("http://m-0.demo-peer.ns.svc.cluster.local:2381"))
	u, err = MetricsURLFor("https://[fd00::1]:2379", 2381)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u).To(Equal("http://[fd00::1]:2381"), "the metrics port is plain HTTP")
	_, err = MetricsURLFor("not a url", 2381)
	g.Expect(err).To(HaveOccurred())
}

// portOf splits a test server's URL into the client URL a member would have
// on its host and the port its metrics are on.
func portOf(t *testing.T, srv string) (string, int) {
	u, err := url.Parse(srv)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + u.Hostname() + ":2379", port
}

func TestReadSelfReport(t *testing.T) {
	g := NewWithT(t)
	ok := serve(t, http.StatusOK, restartedMetrics)
	clientURL, port := portOf(t, ok)
	rep, where := ReadSelfReport(context.Background(), NewMetricsReader(nil), clientURL, port, time.Minute)
	g.Expect(where).To(Equal(ok))
	g.Expect(rep).NotTo(BeNil())
	g.Expect(rep.MemberID).To(Equal(uint64(0x69ed52fabafe0d7f)))

	failing := serve(t, http.StatusServiceUnavailable, "")
	clientURL, port = portOf(t, failing)
	rep, where = ReadSelfReport(context.Background(), NewMetricsReader(nil), clientURL, port, time.Minute)
	g.Expect(rep).To(BeNil())
	g.Expect(where).To(Equal(failing), "where it looked, though nothing was read")

	rep, where = ReadSelfReport(context.Background(), NewMetricsReader(nil), "not a url", port, time.Minute)
	g.Expect(rep).To(BeNil())
	g.Expect(where).To(BeEmpty())
}

func TestReadSelfReports_KeepsTheReportsRead(t *testing.T) {
	g := NewWithT(t)
	okURL, okPort := portOf(t, serve(t, http.StatusOK, restartedMetrics))
	badURL, badPort := portOf(t, serve(t, http.StatusServiceUnavailable, ""))
	g.Expect(okPort).NotTo(Equal(badPort))
	// The metrics port is every member's, as in a cluster, and the test
	// servers share a host: a member that answers and one that does not
	// are read in two calls.
	got := ReadSelfReports(context.Background(), NewMetricsReader(nil), map[string]string{"a": okURL}, okPort, time.Minute)
	g.Expect(got).To(HaveKey("a"))
	got = ReadSelfReports(context.Background(), NewMetricsReader(nil), map[string]string{"a": badURL, "b": "not a url"}, badPort, time.Minute)
	g.Expect(got).To(BeEmpty())
}
