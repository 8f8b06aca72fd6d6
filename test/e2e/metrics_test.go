//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/e2e/framework"
)

const (
	rulesFile     = "charts/etcd-operator/files/prometheus-rules.yaml"
	dashboardFile = "charts/etcd-operator/files/grafana-dashboard.json"
)

// TestPrometheusScrapesOperatorAndMembers runs a real Prometheus on the host,
// discovering Pods through the API server the way the chart's PodMonitor and
// ServiceMonitor do (port named "metrics"), and proves that every member of a
// 3-member cluster serves etcd's metrics with a leader, that the operator
// exports the cluster's etcd_operator_* series, that the chart's alerting
// rules evaluate cleanly and the dashboard's queries run, that a member
// replaced after losing its data is counted and alerted on, and that the
// cluster's series go when it is deleted. Prometheus scrapes the operator
// over HTTPS with a ServiceAccount token bound to the chart's
// metrics-reader ClusterRole.
func TestPrometheusScrapesOperatorAndMembers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	c, err := env.Client()
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.CreateNamespace(t, "metrics")
	const name = "metrics"

	// Prometheus scrapes the operator as one in the cluster would: with a
	// ServiceAccount token that the chart's metrics-reader role authorizes.
	token, unbind, err := env.ServiceAccountToken(ctx, ns, "prometheus", framework.MetricsReaderRole)
	g.Expect(err).NotTo(HaveOccurred())
	defer unbind()
	tokenFile := filepath.Join(t.TempDir(), "token")
	g.Expect(os.WriteFile(tokenFile, []byte(token), 0o600)).To(Succeed())

	prom, err := env.StartPrometheus(t, []framework.PodScrapeJob{
		{
			Name:          "etcd-operator",
			Namespaces:    []string{framework.OperatorNamespace()},
			LabelSelector: framework.OperatorSelector,
			Port:          "metrics",
			// The operator's series name the EtcdCluster's namespace.
			HonorLabels:     true,
			HTTPS:           true,
			BearerTokenFile: tokenFile,
		},
		{
			Name:            "etcd-members",
			Namespaces:      []string{ns},
			LabelSelector:   v1alpha1.ClusterLabel,
			Port:            "metrics",
			TargetNamespace: true,
			PodLabels:       map[string]string{"cluster": v1alpha1.ClusterLabel, "member": v1alpha1.MemberLabel},
		},
	}, filepath.Join(env.RepoRoot, rulesFile))
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("prometheus serves %s (%s)", prom.URL, time.Since(start).Round(time.Millisecond))

	cluster := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](3),
			MemberTemplate: v1alpha1.MemberTemplate{Storage: v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("256Mi"))}},
		},
	}
	g.Expect(c.Create(ctx, cluster)).To(Succeed())
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	ready := time.Now()
	t.Logf("cluster Ready (%s)", time.Since(start).Round(time.Millisecond))
	pods, err := env.MemberPods(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	var members []string
	for m := range pods {
		members = append(members, m)
	}
	sort.Strings(members)
	g.Expect(members).To(HaveLen(3))

	t.Log("every member's target is up and etcd_server_has_leader is 1 on all three")
	sel := fmt.Sprintf(`namespace=%q,cluster=%q`, ns, name)
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		targets, err := prom.Targets(ctx, "etcd-members")
		if err != nil {
			return false, err
		}
		if err := allUp(targets, 3); err != nil {
			return false, err
		}
		samples, err := prom.Query(ctx, `etcd_server_has_leader{job="etcd-members",`+sel+`}`)
		if err != nil {
			return false, err
		}
		var withLeader []string
		for _, s := range samples {
			if s.Value == 1 {
				withLeader = append(withLeader, s.Metric["member"])
			}
		}
		sort.Strings(withLeader)
		if strings.Join(withLeader, ",") != strings.Join(members, ",") {
			return false, fmt.Errorf("members with a leader: %v, want %v", withLeader, members)
		}
		return true, nil
	})).To(Succeed())
	t.Logf("members scraped (%s after Ready)", time.Since(ready).Round(time.Millisecond))

	t.Log("the operator's target is up and it exports the cluster: 3 ready members")
	opSel := fmt.Sprintf(`job="etcd-operator",namespace=%q,cluster=%q`, ns, name)
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		targets, err := prom.Targets(ctx, "etcd-operator")
		if err != nil {
			return false, err
		}
		if !anyUp(targets) {
			return false, fmt.Errorf("no operator target is up: %+v", targets)
		}
		// A scrape from before Ready can show three ready Pods while the
		// last learner awaits its promotion (a scale-up adds the next
		// learner before promoting the last): wait for one that shows the
		// settled cluster.
		if ok, err := queryEquals(ctx, prom, `etcd_operator_cluster_voting_members{`+opSel+`}`, 3); !ok || err != nil {
			return ok, err
		}
		return queryEquals(ctx, prom, `etcd_operator_cluster_ready_members{`+opSel+`}`, 3)
	})).To(Succeed())
	t.Logf("operator scraped (%s after Ready)", time.Since(ready).Round(time.Millisecond))
	for query, want := range map[string]float64{
		`etcd_operator_cluster_desired_members{` + opSel + `}`:                        3,
		`etcd_operator_cluster_voting_members{` + opSel + `}`:                         3,
		`etcd_operator_cluster_learner_members{` + opSel + `}`:                        0,
		`count(etcd_operator_member_db_size_bytes{` + opSel + `} > 0)`:                3,
		`count(etcd_operator_cluster_db_size_bytes{` + opSel + `} > 0)`:               1,
		`count(etcd_operator_cluster_leader_changes_total{` + opSel + `})`:            1,
		`etcd_operator_member_replacements_total{` + opSel + `,reason="DataDirLost"}`: 0,
		// Per-cluster reconcile metrics: passes were timed, errors are counted.
		`clamp_max(etcd_operator_cluster_reconcile_duration_seconds_count{` + opSel + `}, 1)`: 1,
		`count(etcd_operator_cluster_reconcile_errors_total{` + opSel + `})`:                  1,
		// controller-runtime's per-controller reconcile metrics.
		`clamp_max(count(controller_runtime_reconcile_total{job="etcd-operator",controller="etcdcluster"}), 1)`: 1,
	} {
		got, err := prom.Query(ctx, query)
		g.Expect(err).NotTo(HaveOccurred(), query)
		g.Expect(got).To(HaveLen(1), query)
		g.Expect(got[0].Value).To(Equal(want), query)
	}

	t.Log("the chart's alerting rules load and evaluate without error")
	g.Expect(framework.WaitFor(ctx, time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		groups, err := prom.Rules(ctx)
		if err != nil {
			return false, err
		}
		n := 0
		for _, gr := range groups {
			for _, r := range gr.Rules {
				if r.Health != "ok" {
					return false, fmt.Errorf("rule %s in %s: health %q %s", r.Name, gr.Name, r.Health, r.LastError)
				}
				n++
			}
		}
		if n == 0 {
			return false, fmt.Errorf("no rules loaded")
		}
		return true, nil
	})).To(Succeed())

	t.Log("every query of the Grafana dashboard runs")
	for _, expr := range dashboardQueries(t, ns, name) {
		_, err := prom.Query(ctx, expr)
		g.Expect(err).NotTo(HaveOccurred(), expr)
	}

	t.Log("a member loses its data: the replacement is counted and EtcdMemberReplaced fires")
	var all v1alpha1.EtcdMemberList
	g.Expect(c.List(ctx, &all, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ClusterLabel: name})).To(Succeed())
	picked, err := env.PickHealthyVoter(ctx, all.Items, func(m *v1alpha1.EtcdMember) bool { return !m.Spec.Bootstrap })
	g.Expect(err).NotTo(HaveOccurred(), "a member that is not the seed, and a healthy voter, loses its data")
	victim := picked.Name
	broken := time.Now()
	g.Expect(env.LoseDataDir(ctx, ns, victim)).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		ok, err := queryEquals(ctx, prom, `etcd_operator_member_replacements_total{`+opSel+`,reason="DataDirLost"}`, 1)
		if !ok {
			return ok, err
		}
		alerts, err := prom.Query(ctx, `ALERTS{alertname="EtcdMemberReplaced",alertstate="firing",reason="DataDirLost",`+sel+`}`)
		if err != nil || len(alerts) != 1 {
			return false, fmt.Errorf("EtcdMemberReplaced is not firing: %v %v", alerts, err)
		}
		return true, nil
	})).To(Succeed())
	t.Logf("replacement counted and alerted %s after the wipe", time.Since(broken).Round(time.Millisecond))
	_, err = framework.WaitForClusterReady(ctx, c, ns, name, 5*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		targets, err := prom.Targets(ctx, "etcd-members")
		if err != nil {
			return false, err
		}
		if err := allUp(targets, 3); err != nil {
			return false, err
		}
		for _, tg := range targets {
			if tg.Labels["member"] == victim {
				return false, fmt.Errorf("the replaced member %s is still a target", victim)
			}
		}
		// A scrape from before Ready can show three ready Pods while the
		// last learner awaits its promotion (a scale-up adds the next
		// learner before promoting the last): wait for one that shows the
		// settled cluster.
		if ok, err := queryEquals(ctx, prom, `etcd_operator_cluster_voting_members{`+opSel+`}`, 3); !ok || err != nil {
			return ok, err
		}
		return queryEquals(ctx, prom, `etcd_operator_cluster_ready_members{`+opSel+`}`, 3)
	})).To(Succeed())
	t.Logf("healed and scraped again %s after the wipe", time.Since(broken).Round(time.Millisecond))

	t.Log("deleting the cluster removes its series from the operator's metrics")
	deleted := time.Now()
	g.Expect(c.Delete(ctx, cluster)).To(Succeed())
	g.Expect(framework.WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		got, err := prom.Query(ctx, `{__name__=~"etcd_operator_.+",`+opSel+`}`)
		if err != nil {
			return false, err
		}
		if len(got) > 0 {
			return false, fmt.Errorf("%d series remain, such as %v", len(got), got[0].Metric)
		}
		return true, nil
	})).To(Succeed())
	t.Logf("series gone %s after the delete; %s in all", time.Since(deleted).Round(time.Millisecond),
		time.Since(start).Round(time.Millisecond))
}

func allUp(targets []framework.PromTarget, want int) error {
	if len(targets) != want {
		return fmt.Errorf("%d targets, want %d", len(targets), want)
	}
	for _, t := range targets {
		if t.Health != "up" {
			return fmt.Errorf("target %s is %s: %s", t.ScrapeURL, t.Health, t.LastError)
		}
	}
	return nil
}

func anyUp(targets []framework.PromTarget) bool {
	for _, t := range targets {
		if t.Health == "up" {
			return true
		}
	}
	return false
}

func queryEquals(ctx context.Context, prom *framework.Prometheus, query string, want float64) (bool, error) {
	got, err := prom.Query(ctx, query)
	if err != nil {
		return false, err
	}
	if len(got) != 1 || got[0].Value != want {
		return false, fmt.Errorf("%s = %v, want one sample of %v", query, got, want)
	}
	return true, nil
}

// dashboardQueries are the dashboard's panel queries with its variables set
// to one cluster.
func dashboardQueries(t *testing.T, ns, cluster string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.RepoRoot, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	r := strings.NewReplacer("$namespace", ns, "$cluster", cluster)
	var out []string
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, pr := range raw {
			var p panel
			if err := json.Unmarshal(pr, &p); err != nil {
				t.Fatalf("%s: %v", dashboardFile, err)
			}
			for _, tg := range p.Targets {
				out = append(out, r.Replace(tg.Expr))
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	if len(out) == 0 {
		t.Fatalf("%s has no queries", dashboardFile)
	}
	return out
}

// TestOperatorMetricsNeedAToken: the operator's metrics endpoint answers
// only callers the API server authenticates (401 without a token, refused
// with a forged one) and
// authorizes for get on /metrics (403 for a ServiceAccount without the
// chart's metrics-reader role); with that role the same scrape succeeds.
func TestOperatorMetricsNeedAToken(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g.Expect(env.CheckOperatorRunning(ctx)).To(Succeed())
	ns := env.CreateNamespace(t, "metrics-auth")
	reader, unbind, err := env.ServiceAccountToken(ctx, ns, "reader", framework.MetricsReaderRole)
	g.Expect(err).NotTo(HaveOccurred())
	defer unbind()
	stranger, _, err := env.ServiceAccountToken(ctx, ns, "stranger", "")
	g.Expect(err).NotTo(HaveOccurred())

	pods, err := env.Clientset.CoreV1().Pods(framework.OperatorNamespace()).List(ctx, metav1.ListOptions{LabelSelector: framework.OperatorSelector})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).NotTo(BeEmpty())
	for _, p := range pods.Items {
		if !framework.PodReady(&p) || p.Status.PodIP == "" {
			continue
		}
		t.Logf("operator Pod %s at %s", p.Name, p.Status.PodIP)
		g.Expect(framework.ScrapeOperator(ctx, p.Status.PodIP, "")).To(Equal(http.StatusUnauthorized), "an anonymous scrape")
		// A token the API server cannot parse comes back from the
		// TokenReview with an error, which controller-runtime's filter
		// answers with 500 rather than 401: refused either way, and no
		// series leak.
		code, body, err := framework.OperatorMetrics(ctx, p.Status.PodIP, "not-a-token")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusInternalServerError), "a scrape with a forged token")
		g.Expect(string(body)).NotTo(ContainSubstring("# HELP"), "a scrape with a forged token")
		// The binding may take a moment to reach the authorizer's cache.
		g.Eventually(func() (int, error) { return framework.ScrapeOperator(ctx, p.Status.PodIP, reader) }).
			WithTimeout(time.Minute).Should(Equal(http.StatusOK), "a scrape with the metrics reader's token")
		g.Expect(framework.ScrapeOperator(ctx, p.Status.PodIP, stranger)).To(Equal(http.StatusForbidden), "a scrape with a token not allowed /metrics")
	}
}
