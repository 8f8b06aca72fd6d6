package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// OpMetrics names a read of a member's metrics endpoint in CallError.Op.
const OpMetrics = "Metrics"

// SelfReport is what a member says of itself on its metrics endpoint.
//
// It exists for members that do not answer on their client URL: etcd serves
// clients only once it has published itself to the cluster, a raft proposal
// that needs a quorum, so a member restarted while the quorum is lost keeps
// its client port closed to requests for as long as the loss lasts. The
// metrics listener starts before that, and its gauges carry what a recovery
// needs to compare survivors.
type SelfReport struct {
	MemberID uint64
	// HasLeader: the member follows a leader.
	HasLeader bool
	IsLearner bool
	// AppliedIndex is the last raft index the member applied.
	AppliedIndex uint64
	// CommittedIndex is the last raft index the member knows committed, as
	// far as the gauge knows: etcd sets it when raft's hard state changes,
	// so after a restart without a leader it can read 0. It is never below
	// AppliedIndex here, since etcd applies only what is committed.
	CommittedIndex uint64
	// Revision is the store revision the member has applied.
	Revision int64
}

// Status renders the report as the part of an EndpointStatus it knows.
// LeaderID stays 0: the gauge says whether there is a leader, not which.
func (r SelfReport) Status(endpoint string) EndpointStatus {
	return EndpointStatus{
		Endpoint:         endpoint,
		MemberID:         r.MemberID,
		RaftIndex:        r.CommittedIndex,
		RaftAppliedIndex: r.AppliedIndex,
		IsLearner:        r.IsLearner,
		Revision:         r.Revision,
	}
}

// MetricsReader reads members' metrics endpoints.
type MetricsReader interface {
	// SelfReport reads the member behind metricsURL (scheme and host, as
	// --listen-metrics-urls has it). It answers without a quorum.
	SelfReport(ctx context.Context, metricsURL string) (SelfReport, error)
}

// MaxMetricsBytes bounds the metrics page the operator reads of a member:
// etcd 3.7.3 serves about 175 kB, and 4 MiB leaves room for many more
// series while keeping a member's page from taking the operator's memory.
// See docs/design/0016-bounded-replies.md.
const MaxMetricsBytes = 4 << 20

// ErrMetricMissing: the metrics endpoint answered without a gauge the
// report needs, as an etcd that is not one would.
var ErrMetricMissing = errors.New("metric missing")

type metricsReader struct{ hc *http.Client }

// NewMetricsReader reads metrics over hc, or over a client of its own when
// hc is nil. Each call is bounded by its context.
func NewMetricsReader(hc *http.Client) MetricsReader {
	if hc == nil {
		hc = &http.Client{}
	}
	return &metricsReader{hc: hc}
}

// MetricsURLFor is the metrics URL of a member whose client URL is clientURL:
// the same host, on the metrics port, over plain HTTP, as the operator's
// member Pods listen.
func MetricsURLFor(clientURL string, port int) (string, error) {
	u, err := url.Parse(clientURL)
	if err != nil {
		return "", fmt.Errorf("failed to parse client URL %q: %w", clientURL, err)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("failed to parse client URL %q: no host", clientURL)
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(u.Hostname(), strconv.Itoa(port))}).String(), nil
}

// ReadSelfReport reads the metrics of the member whose client URL is
// clientURL, on port, under a budget of its own: a Status call before it may
// have used up the caller's. It returns where it looked, and the report only
// when one was read; the metrics URL is "" when clientURL names no host.
func ReadSelfReport(ctx context.Context, r MetricsReader, clientURL string, port int, timeout time.Duration) (*SelfReport, string) {
	metricsURL, err := MetricsURLFor(clientURL, port)
	if err != nil {
		return nil, ""
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := r.SelfReport(ctx, metricsURL)
	if err != nil {
		return nil, metricsURL
	}
	return &rep, metricsURL
}

// ReadSelfReports reads the metrics of every member, by name, at once, each
// as ReadSelfReport does, and returns the reports that were read. Without a
// quorum a member restarted on its data serves no client request, and its
// metrics are the only place it says how far it got.
func ReadSelfReports(ctx context.Context, r MetricsReader, clientURLs map[string]string, port int, timeout time.Duration) map[string]SelfReport {
	var mu sync.Mutex
	out := map[string]SelfReport{}
	var wg sync.WaitGroup
	for name, clientURL := range clientURLs {
		wg.Go(func() {
			if rep, _ := ReadSelfReport(ctx, r, clientURL, port, timeout); rep != nil {
				mu.Lock()
				defer mu.Unlock()
				out[name] = *rep
			}
		})
	}
	wg.Wait()
	return out
}

func (m *metricsReader) SelfReport(ctx context.Context, metricsURL string) (SelfReport, error) {
	fail := func(err error) (SelfReport, error) {
		return SelfReport{}, &CallError{Op: OpMetrics, Endpoint: metricsURL, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL+"/metrics", nil)
	if err != nil {
		return fail(err)
	}
	resp, err := m.hc.Do(req)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("unexpected HTTP status %s", resp.Status))
	}
	page, err := readBounded(resp.Body, MaxMetricsBytes)
	if err != nil {
		return fail(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return fail(fmt.Errorf("failed to parse metrics: %w", err))
	}
	r, err := ParseSelfReport(families)
	if err != nil {
		return fail(err)
	}
	return r, nil
}

// readBounded reads all of r if it holds at most limit bytes. A longer page
// is refused whole: parsing its first limit bytes would read a report from
// a page cut off at some line, or fail on the cut as if it were malformed.
func readBounded(r io.Reader, limit int) ([]byte, error) {
	page, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read metrics: %w", err)
	}
	if len(page) > limit {
		return nil, &ReplyTooLargeError{What: OpMetrics, Limit: limit}
	}
	return page, nil
}

// ParseSelfReport reads a report from parsed metric families. The gauges
// are those of etcd 3.5 to 3.7.
func ParseSelfReport(families map[string]*dto.MetricFamily) (SelfReport, error) {
	var r SelfReport
	var errs []error
	gauge := func(name string) float64 {
		f := families[name]
		if f == nil || len(f.GetMetric()) == 0 {
			errs = append(errs, fmt.Errorf("%w: %s", ErrMetricMissing, name))
			return 0
		}
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	r.HasLeader = gauge("etcd_server_has_leader") == 1
	r.IsLearner = gauge("etcd_server_is_learner") == 1
	r.AppliedIndex = toUint(gauge("etcd_server_proposals_applied_total"))
	r.CommittedIndex = max(toUint(gauge("etcd_server_proposals_committed_total")), r.AppliedIndex)
	r.Revision = int64(toUint(gauge("etcd_debugging_mvcc_current_revision")))
	// etcd_server_id carries the ID in its label, with the value 1.
	if f := families["etcd_server_id"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "server_id" && m.GetGauge().GetValue() == 1 {
					id, err := strconv.ParseUint(l.GetValue(), 16, 64)
					if err != nil {
						errs = append(errs, fmt.Errorf("failed to parse etcd_server_id %q: %w", l.GetValue(), err))
					}
					r.MemberID = id
				}
			}
		}
	}
	if r.MemberID == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%w: etcd_server_id", ErrMetricMissing))
	}
	if err := errors.Join(errs...); err != nil {
		return SelfReport{}, err
	}
	return r, nil
}

func toUint(v float64) uint64 {
	if v <= 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(v)
}
