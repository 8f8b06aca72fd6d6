package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// PodScrapeJob scrapes one named container port of the Pods of the cluster
// under test that match a label selector.
type PodScrapeJob struct {
	Name string
	// Namespaces to discover Pods in; empty means every namespace.
	Namespaces []string
	// LabelSelector is a Kubernetes label selector.
	LabelSelector string
	// Port is the name of the container port to scrape.
	Port string
	// HonorLabels keeps the scraped series' own labels where they clash with
	// the target's, as the operator's namespace label must be kept.
	HonorLabels bool
	// PodLabels adds target labels from Pod labels: target label -> Pod label.
	PodLabels map[string]string
	// TargetNamespace adds the Pod's namespace and name as namespace and pod.
	TargetNamespace bool
	// HTTPS scrapes over TLS without verifying the target's certificate
	// (the operator's is self-signed), as the chart's ServiceMonitor does.
	HTTPS bool
	// BearerTokenFile is sent as the scrape's bearer token, as a
	// Prometheus in the cluster sends its ServiceAccount's.
	BearerTokenFile string
}

// Prometheus is a real Prometheus server on the host, upstream's, built from
// the pinned module by make prometheus. It discovers Pods through the API
// server with kubernetes_sd_configs (role pod) and the cluster's kubeconfig,
// as a Prometheus inside a cluster does, and scrapes them by Pod IP, which the
// host routes to.
type Prometheus struct {
	// URL is the server's base URL, http://127.0.0.1:<port>.
	URL  string
	dir  string
	cmd  *exec.Cmd
	done chan error
}

// StartPrometheus runs Prometheus with a temporary configuration and storage
// directory on a free loopback port. ruleFiles are loaded as rule_files. The
// server is stopped, and its directory removed, when the test ends. A missing
// binary is an error: the e2e suite never skips.
func (e *Env) StartPrometheus(t testing.TB, jobs []PodScrapeJob, ruleFiles ...string) (*Prometheus, error) {
	t.Helper()
	binary := filepath.Join(e.Layout.CachedPrometheusBinaries(e.Versions), "prometheus")
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("prometheus %s is not built (make prometheus builds it): %w", e.Versions.Prometheus, err)
	}
	dir, err := os.MkdirTemp("", "e2e-prometheus-")
	if err != nil {
		return nil, err
	}
	p := &Prometheus{dir: dir}
	t.Cleanup(func() { p.stop(t) })

	config := map[string]any{
		"global": map[string]any{
			"scrape_interval":     "2s",
			"scrape_timeout":      "2s",
			"evaluation_interval": "2s",
		},
		"scrape_configs": scrapeConfigs(jobs, e.Kubeconfig),
	}
	if len(ruleFiles) > 0 {
		config["rule_files"] = ruleFiles
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return nil, err
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, data, 0o600); err != nil {
		return nil, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	p.URL = "http://" + addr
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	p.cmd = exec.Command(binary,
		"--config.file="+configFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--storage.tsdb.retention.time=1h",
		"--log.level=warn",
	)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start prometheus: %w", err)
	}
	p.done = make(chan error, 1)
	go func() { p.done <- p.cmd.Wait() }()
	if err := p.waitReady(30 * time.Second); err != nil {
		return nil, fmt.Errorf("%w\nprometheus log:\n%s", err, p.Log())
	}
	return p, nil
}

func scrapeConfigs(jobs []PodScrapeJob, kubeconfig string) []any {
	var out []any
	for _, j := range jobs {
		relabel := []any{
			map[string]any{
				"source_labels": []string{"__meta_kubernetes_pod_container_port_name"},
				"regex":         j.Port,
				"action":        "keep",
			},
			// A Pod not started, or finished, is no target.
			map[string]any{
				"source_labels": []string{"__meta_kubernetes_pod_phase"},
				"regex":         "Running",
				"action":        "keep",
			},
		}
		if j.TargetNamespace {
			relabel = append(relabel,
				map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
				map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"})
		}
		for target, podLabel := range j.PodLabels {
			relabel = append(relabel, map[string]any{
				"source_labels": []string{"__meta_kubernetes_pod_label_" + sanitizeLabel(podLabel)},
				"target_label":  target,
			})
		}
		job := map[string]any{
			"job_name":              j.Name,
			"honor_labels":          j.HonorLabels,
			"kubernetes_sd_configs": []any{kubernetesPodDiscovery(j, kubeconfig)},
			"relabel_configs":       relabel,
			"metrics_path":          "/metrics",
			"scheme":                "http",
		}
		if j.HTTPS {
			job["scheme"] = "https"
			job["tls_config"] = map[string]any{"insecure_skip_verify": true}
		}
		if j.BearerTokenFile != "" {
			job["authorization"] = map[string]any{"type": "Bearer", "credentials_file": j.BearerTokenFile}
		}
		out = append(out, job)
	}
	return out
}

// kubernetesPodDiscovery watches the job's Pods: only its namespaces (all when
// none are named) and only Pods matching its label selector, filtered by the
// API server rather than by relabelling.
func kubernetesPodDiscovery(j PodScrapeJob, kubeconfig string) map[string]any {
	sd := map[string]any{
		"role":            "pod",
		"kubeconfig_file": kubeconfig,
	}
	if len(j.Namespaces) > 0 {
		sd["namespaces"] = map[string]any{"names": j.Namespaces}
	}
	if j.LabelSelector != "" {
		sd["selectors"] = []any{map[string]any{"role": "pod", "label": j.LabelSelector}}
	}
	return sd
}

// sanitizeLabel is how Prometheus' Kubernetes discovery names a Pod label:
// every character outside [a-zA-Z0-9_] becomes an underscore.
func sanitizeLabel(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (p *Prometheus) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("prometheus exited: %v", err)
		default:
		}
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("prometheus at %s was not ready within %s", p.URL, timeout)
}

// Log is what the server has logged so far.
func (p *Prometheus) Log() string {
	data, err := os.ReadFile(filepath.Join(p.dir, "prometheus.log"))
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// stop ends the server (SIGTERM, then SIGKILL after 10 s) and removes its
// directory.
func (p *Prometheus) stop(t testing.TB) {
	if p.cmd != nil && p.cmd.Process != nil {
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.Log())
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		var exit error
		select {
		case exit = <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			exit = <-p.done
		}
		if exit != nil {
			t.Logf("prometheus exited: %v", exit)
		}
	}
	if err := os.RemoveAll(p.dir); err != nil {
		t.Errorf("failed to remove %s: %v", p.dir, err)
	}
}

// PromTarget is one active target, as /api/v1/targets reports it.
type PromTarget struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

// Targets returns the active targets of one job.
func (p *Prometheus) Targets(ctx context.Context, job string) ([]PromTarget, error) {
	var data struct {
		ActiveTargets []PromTarget `json:"activeTargets"`
	}
	if err := p.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
		return nil, err
	}
	var out []PromTarget
	for _, t := range data.ActiveTargets {
		if t.Labels["job"] == job {
			out = append(out, t)
		}
	}
	return out, nil
}

// Sample is one series of an instant vector.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// Query evaluates an instant query and returns its vector.
func (p *Prometheus) Query(ctx context.Context, query string) ([]Sample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {query}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q gave a %s, not a vector", query, data.ResultType)
	}
	out := make([]Sample, 0, len(data.Result))
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: bad value %v", query, r.Value[1])
		}
		out = append(out, Sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// RuleGroup is one group of /api/v1/rules.
type RuleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []struct {
		Name      string `json:"name"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
		Type      string `json:"type"`
		State     string `json:"state"`
	} `json:"rules"`
}

// Rules returns the loaded rule groups with each rule's last evaluation.
func (p *Prometheus) Rules(ctx context.Context) ([]RuleGroup, error) {
	var data struct {
		Groups []RuleGroup `json:"groups"`
	}
	err := p.get(ctx, "/api/v1/rules", nil, &data)
	return data.Groups, err
}

// get calls one endpoint of the HTTP API and decodes its data field.
func (p *Prometheus) get(ctx context.Context, path string, params url.Values, into any) error {
	u := p.URL + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var envelope struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if envelope.Status != "success" {
		return errors.New("GET " + path + ": " + envelope.ErrorType + ": " + envelope.Error)
	}
	return json.Unmarshal(envelope.Data, into)
}
