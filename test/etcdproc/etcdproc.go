// Package etcdproc runs real etcd members as local processes on loopback,
// for tests that need etcd itself but no Kubernetes: the linearizability
// checker's own tests, and the check that the flags the operator renders for
// an etcd version are ones that version accepts.
//
// The binaries come from the local cluster's cache (see
// localcluster.Layout.EtcdBinaries), so they are the very builds the e2e
// suite runs in Pods.
//
// The package is test infrastructure: nothing in the product imports it.
package etcdproc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/test/localcluster"
	"github.com/quorumctl/etcd-operator/test/ports"
)

// startTimeout bounds how long a cluster may take to answer a linearizable
// read; a loopback cluster elects a leader in about a second.
const startTimeout = 30 * time.Second

// Binary returns the path of the etcd binary of a version (such as v3.6.16),
// or of the default version in versions.env when version is empty, building
// it into the shared cache if it is not there. A test that cannot get it
// fails; it never skips.
func Binary(t testing.TB, version string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("failed to get the working directory: %v", err)
	}
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		t.Fatalf("failed to find the repository root: %v", err)
	}
	layout, err := localcluster.NewLayout(root)
	if err != nil {
		t.Fatalf("failed to find the binary cache: %v", err)
	}
	if version == "" {
		v, err := localcluster.LoadVersions(root)
		if err != nil {
			t.Fatalf("failed to load the pinned versions: %v", err)
		}
		version = v.EtcdDefault
	}
	dir, err := layout.EtcdBinaries(context.Background(), localcluster.NewProgress(testWriter{t}), version)
	if err != nil {
		t.Fatalf("failed to get the etcd %s binaries: %v", version, err)
	}
	return ownCopy(t, dir)
}

// ownCopy links (or copies) the binaries of dir into a temp dir of the
// test's and returns the etcd there; etcdutl and etcdctl stay beside it,
// where tests look for them. The local cluster's sweep SIGKILLs every
// process whose executable lies under the shared binary cache
// (localcluster.Layout.LeftoverProcesses), so an e2e run bringing its
// cluster up or down on the same machine killed the members of a test run
// from the cache, mid-test and without a word in their logs.
func ownCopy(t testing.TB, dir string) string {
	t.Helper()
	own := t.TempDir()
	for _, name := range []string{"etcd", "etcdutl", "etcdctl"} {
		src, dst := filepath.Join(dir, name), filepath.Join(own, name)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := os.Link(src, dst); err == nil {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("failed to read %s: %v", src, err)
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil { //nolint:gosec // an executable
			t.Fatalf("failed to copy %s: %v", src, err)
		}
	}
	return filepath.Join(own, "etcd")
}

// Versions returns the etcd versions versions.env pins (ETCD_VERSIONS).
func Versions(t testing.TB) []string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("failed to get the working directory: %v", err)
	}
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		t.Fatalf("failed to find the repository root: %v", err)
	}
	v, err := localcluster.LoadVersions(root)
	if err != nil {
		t.Fatalf("failed to load the pinned versions: %v", err)
	}
	return v.Etcd
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Member is one etcd process.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	// MetricsURL serves /metrics and /health apart from the client URL,
	// as a member Pod's metrics port does; set for StartCluster's members.
	MetricsURL string
	DataDir    string
	// LogFile receives the process's output, in the test's artifact dir.
	LogFile string

	// Token is the cluster's --initial-cluster-token.
	Token string

	bin    string
	args   []string
	env    []string
	cmd    *exec.Cmd
	exited chan struct{}
	// clientTLS dials the member's https client URL.
	clientTLS *tls.Config
}

// Options shape a cluster.
type Options struct {
	// Members is the number of members; 0 means 1.
	Members int
	// Args are extra flags for every member.
	Args []string
	// Token is the --initial-cluster-token; distinct tokens keep two
	// clusters from ever talking to each other. Empty means the test's name.
	Token string
	// ClientScheme and PeerScheme are http (the default) or https; with
	// https, MemberArgs must give the member its certificate flags.
	ClientScheme, PeerScheme string
	// MemberArgs are extra flags for one member, such as its certificates.
	MemberArgs func(m *Member) []string
	// ClientTLS dials https client URLs, for the readiness check.
	ClientTLS *tls.Config
}

// StartCluster starts a new cluster and waits until every member serves a
// linearizable read. The members are stopped when the test ends.
func StartCluster(t testing.TB, bin string, opts Options) []*Member {
	t.Helper()
	n := max(opts.Members, 1)
	token := opts.Token
	if token == "" {
		token = strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	}
	ports := freePorts(t, 3*n)
	dir := t.TempDir()
	// Logs go to the artifact dir, which go test -artifacts keeps.
	logs := t.ArtifactDir()
	members := make([]*Member, n)
	var initial []string
	clientScheme, peerScheme := cmpOr(opts.ClientScheme, "http"), cmpOr(opts.PeerScheme, "http")
	for i := range members {
		m := &Member{
			Name:       fmt.Sprintf("m%d", i),
			ClientURL:  fmt.Sprintf("%s://127.0.0.1:%d", clientScheme, ports[3*i]),
			PeerURL:    fmt.Sprintf("%s://127.0.0.1:%d", peerScheme, ports[3*i+1]),
			MetricsURL: fmt.Sprintf("http://127.0.0.1:%d", ports[3*i+2]),
			Token:      token,
			bin:        bin,
			clientTLS:  opts.ClientTLS,
		}
		m.DataDir = filepath.Join(dir, m.Name)
		m.LogFile = filepath.Join(logs, token+"-"+m.Name+".log")
		members[i] = m
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range members {
		m.args = append([]string{
			"--name=" + m.Name,
			"--data-dir=" + m.DataDir,
			"--listen-client-urls=" + m.ClientURL,
			"--advertise-client-urls=" + m.ClientURL,
			"--listen-peer-urls=" + m.PeerURL,
			"--initial-advertise-peer-urls=" + m.PeerURL,
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-state=new",
			"--initial-cluster-token=" + token,
			"--listen-metrics-urls=" + m.MetricsURL,
		}, opts.Args...)
		if opts.MemberArgs != nil {
			m.args = append(m.args, opts.MemberArgs(m)...)
		}
		if err := m.start(); err != nil {
			t.Fatalf("failed to start etcd %s: %v", m.Name, err)
		}
		t.Cleanup(m.Stop)
	}
	for _, m := range members {
		if err := m.WaitReady(startTimeout); err != nil {
			t.Fatalf("etcd %s did not become ready: %v\n%s", m.Name, err, m.LogTail(30))
		}
	}
	return members
}

// Refuses runs a one-member etcd with extra flags that it is expected to
// refuse, and returns its output once it has exited with an error. An etcd
// that starts anyway, or exits cleanly, fails the test.
func Refuses(t testing.TB, bin string, args ...string) string {
	t.Helper()
	ports := freePorts(t, 2)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{
		"--name=refuses",
		"--data-dir=" + filepath.Join(t.TempDir(), "data"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=refuses=" + peer,
	}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("etcd kept running with %v", args)
	case !errors.As(err, &exit):
		t.Fatalf("etcd with %v did not fail as expected: %v\n%s", args, err, out)
	}
	return string(out)
}

// ClientURLs lists the members' client URLs.
func ClientURLs(members []*Member) []string {
	urls := make([]string, 0, len(members))
	for _, m := range members {
		urls = append(urls, m.ClientURL)
	}
	return urls
}

func (m *Member) start() error {
	log, err := os.OpenFile(m.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = log, log
	if m.env != nil {
		cmd.Env = append(os.Environ(), m.env...)
	}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return err
	}
	m.cmd, m.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(m.exited)
	}()
	return nil
}

// Bin is the etcd binary the member runs, for a member that joins it.
func (m *Member) Bin() string { return m.bin }

// Kill ends the process at once, as a crash or a lost node would.
func (m *Member) Kill() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
}

// Stop ends the process gracefully, and kills it if it does not end.
func (m *Member) Stop() {
	if m.cmd == nil {
		return
	}
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		m.Kill()
	}
}

// Restart starts the member again on its data dir, as it was.
func (m *Member) Restart() error {
	select {
	case <-m.exited:
	default:
		return errors.New("etcd " + m.Name + " is still running")
	}
	return m.start()
}

// RestartWith starts the stopped member again on its data dir with another
// etcd binary, as a rolling upgrade or downgrade does.
func (m *Member) RestartWith(bin string) error {
	m.bin = bin
	return m.Restart()
}

// RestartWithEnv starts the member again on its data dir, with each flag that
// env names (ETCD_INITIAL_CLUSTER for --initial-cluster, and so on) taken
// off its command line and given as that variable instead, as a member Pod
// gets its startup values from its ConfigMap. Variables of earlier restarts
// are dropped.
func (m *Member) RestartWithEnv(env map[string]string) error {
	select {
	case <-m.exited:
	default:
		return errors.New("etcd " + m.Name + " is still running")
	}
	m.env = []string{}
	for key, value := range env {
		flag := "--" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(key, "ETCD_")), "_", "-") + "="
		kept := m.args[:0:0]
		for _, a := range m.args {
			if !strings.HasPrefix(a, flag) {
				kept = append(kept, a)
			}
		}
		m.args = kept
		m.env = append(m.env, key+"="+value)
	}
	return m.start()
}

// WipeDataDir stops the member at once and removes its data dir, as a lost
// volume would leave it. The member stays stopped.
func (m *Member) WipeDataDir() error {
	m.Kill()
	return os.RemoveAll(m.DataDir)
}

// NewMember allocates a member of the cluster whose first member is peer,
// with its own URLs and data dir, without starting it: its peer URL must be
// added to the cluster first. Join starts it.
func NewMember(t testing.TB, bin, name string, peer *Member) *Member {
	t.Helper()
	ports := freePorts(t, 2)
	m := &Member{
		Name:      name,
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		DataDir:   filepath.Join(t.TempDir(), name),
		LogFile:   filepath.Join(t.ArtifactDir(), peer.Token+"-"+name+".log"),
		Token:     peer.Token,
		bin:       bin,
	}
	t.Cleanup(m.Stop)
	return m
}

// Join starts a member made by NewMember as a joiner of an existing
// cluster, with the --initial-cluster that adding it returned.
func (m *Member) Join(initialCluster string, extra ...string) error {
	m.args = append([]string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=existing",
		"--initial-cluster-token=" + m.Token,
	}, extra...)
	return m.start()
}

// WaitExited waits for the process to end by itself.
func (m *Member) WaitExited(timeout time.Duration) error {
	select {
	case <-m.exited:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("etcd %s still runs after %s", m.Name, timeout)
	}
}

// WaitReady polls until the member serves a linearizable read, which needs a
// leader and this member caught up with it, or the process exits.
func (m *Member) WaitReady(timeout time.Duration) error {
	return m.waitReady(timeout, "")
}

// WaitReadyWith is WaitReady on a cluster with authentication on, reading
// as root with rootPassword. A client with a password fetches its token
// when it is made, which needs the member ready, so each attempt makes one.
func (m *Member) WaitReadyWith(timeout time.Duration, rootPassword string) error {
	return m.waitReady(timeout, rootPassword)
}

func (m *Member) waitReady(timeout time.Duration, rootPassword string) error {
	cfg := clientv3.Config{
		Endpoints:   []string{m.ClientURL},
		DialTimeout: time.Second,
		TLS:         m.clientTLS,
		Logger:      zap.NewNop(),
	}
	if rootPassword != "" {
		cfg.Username, cfg.Password = "root", rootPassword
	}
	deadline := time.Now().Add(timeout)
	for {
		err := readOnce(cfg)
		if err == nil {
			return nil
		}
		select {
		case <-m.exited:
			return fmt.Errorf("the process exited: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readOnce makes a client and does one linearizable read with it.
func readOnce(cfg clientv3.Config) error {
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "etcdproc-ready")
	return err
}

// Version is the server version the member reports in its Status.
func (m *Member) Version() (string, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{m.ClientURL},
		DialTimeout: 5 * time.Second,
		TLS:         m.clientTLS,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return "", err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, m.ClientURL)
	if err != nil {
		return "", fmt.Errorf("failed to get the status of %s: %w", m.Name, err)
	}
	return st.Version, nil
}

// Exited says whether the process has ended.
func (m *Member) Exited() bool {
	select {
	case <-m.exited:
		return true
	default:
		return false
	}
}

// LogTail returns the last lines of the member's log.
func (m *Member) LogTail(lines int) string {
	f, err := os.Open(m.LogFile)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	parts := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// freePorts reserves n loopback ports for the test's members; see package
// ports for why the kernel's port 0 is not enough for a member that binds
// its ports again on every restart.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	return ports.Reserve(t, n)
}

// Args are the member's flags.
func (m *Member) Args() []string { return append([]string(nil), m.args...) }

// RestartWithFlags starts a stopped member again with other flags, as a rollout
// re-creates a Pod from a new template on the same data dir. clientTLS, if
// not nil, replaces the TLS the readiness check dials with, and clientURL,
// if not empty, the member's client URL.
func (m *Member) RestartWithFlags(args []string, clientURL string, clientTLS *tls.Config) error {
	m.args = append([]string(nil), args...)
	if clientURL != "" {
		m.ClientURL = clientURL
	}
	if clientTLS != nil {
		m.clientTLS = clientTLS
	}
	return m.Restart()
}

// PID is the member's process ID, to show that it was not restarted.
func (m *Member) PID() int {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

func cmpOr(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
}

// FreePorts reserves n loopback ports until the test ends.
func FreePorts(t testing.TB, n int) []int { return freePorts(t, n) }
