package etcdproc

import (
	"fmt"
	"path/filepath"
	"testing"
)

// Node is where one member listens: free loopback ports picked once, so a
// restore can be told the peer URL the member will later start with.
type Node struct {
	Name      string
	ClientURL string
	PeerURL   string
}

// NewNode picks free ports for a member called name.
func NewNode(t testing.TB, name string) Node {
	t.Helper()
	ports := freePorts(t, 2)
	return Node{
		Name:      name,
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
	}
}

// StartOnDataDir starts a one-member etcd on a data dir that exists already,
// such as one etcdutl snapshot restore wrote for n, and waits until it
// serves a linearizable read. etcd ignores --initial-cluster on a data dir
// it can open; it is given the member alone, as a restore's seed gets.
func StartOnDataDir(t testing.TB, bin string, n Node, dataDir, token string, extra ...string) *Member {
	t.Helper()
	m := &Member{
		Name:      n.Name,
		ClientURL: n.ClientURL,
		PeerURL:   n.PeerURL,
		DataDir:   dataDir,
		LogFile:   filepath.Join(t.ArtifactDir(), token+"-"+n.Name+".log"),
		bin:       bin,
	}
	m.args = append([]string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + m.Name + "=" + m.PeerURL,
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + token,
	}, extra...)
	if err := m.start(); err != nil {
		t.Fatalf("failed to start etcd %s: %v", m.Name, err)
	}
	t.Cleanup(m.Stop)
	if err := m.WaitReady(startTimeout); err != nil {
		t.Fatalf("etcd %s did not become ready on %s: %v\n%s", m.Name, dataDir, err, m.LogTail(30))
	}
	return m
}
