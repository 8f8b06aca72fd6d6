//go:build integration

package framework

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/internal/remediation"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

// TestCorruptWALScriptBreaksEtcd runs CorruptDataDir's script on a running
// member's data dir, as the e2e tests do, stops the member as RestartEtcd
// does and starts it again: every etcd version must refuse to start, with a
// line the operator reads as DataCorrupt. Damage that etcd can repair, or
// that a graceful stop overwrites, would let the member start cleanly and the
// corruption tests wait for a replacement that never comes.
func TestCorruptWALScriptBreaksEtcd(t *testing.T) {
	for _, version := range etcdproc.Versions(t) {
		t.Run(version, func(t *testing.T) {
			m := etcdproc.StartCluster(t, etcdproc.Binary(t, version), etcdproc.Options{})[0]
			cli, err := EtcdClient(m.ClientURL)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := PutKeys(ctx, cli, "k", 50); err != nil {
				t.Fatal(err)
			}
			_ = cli.Close()
			out, err := exec.CommandContext(ctx, "sh", "-c", corruptWALScript(m.DataDir)).CombinedOutput()
			if err != nil {
				t.Fatalf("the script failed: %v\n%s", err, out)
			}
			m.Stop()
			if err := m.Restart(); err != nil {
				t.Fatal(err)
			}
			if err := m.WaitExited(30 * time.Second); err != nil {
				t.Fatalf("etcd %s started on a corrupted WAL: %v\n%s", version, err, m.LogTail(20))
			}
			log := m.LogTail(20)
			if !strings.Contains(log, "crc mismatch") {
				t.Fatalf("etcd %s did not exit for a CRC mismatch:\n%s", version, log)
			}
			if reason, line, ok := remediation.ClassifyTermination(log); !ok || reason != remediation.DataCorrupt {
				t.Fatalf("the operator reads the exit as %q (%t) from %q, want DataCorrupt", reason, ok, line)
			}
		})
	}
}

// TestLooksAtRealMembers: the quorum look and the members sample, against a
// real three-member cluster, whole and then with two members killed.
func TestLooksAtRealMembers(t *testing.T) {
	members := etcdproc.StartCluster(t, etcdproc.Binary(t, ""), etcdproc.Options{Members: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eps := etcdproc.ClientURLs(members)
	names := []string{"m0", "m1", "m2"}
	addrs := map[string]string{}
	for _, m := range members {
		addrs[m.Name] = m.ClientURL
	}

	if l := judgeQuorum(ctx, time.Now(), eps); !l.held || l.blind {
		t.Fatalf("a whole cluster: %+v", l)
	}
	s := sampleMembers(ctx, names, addrs, nil)
	if len(s.Down) != 0 || s.Leader() == 0 || s.Done.Before(s.At) {
		t.Fatalf("a whole cluster's sample: %+v", s)
	}

	members[1].Kill()
	members[2].Kill()
	if l := judgeQuorum(ctx, time.Now(), eps); l.held || l.blind {
		t.Fatalf("one member of three left: %+v", l)
	}
	s = sampleMembers(ctx, names, addrs, nil)
	if !slices.Equal(s.Down, []string{"m1", "m2"}) {
		t.Fatalf("down %v, want the two killed", s.Down)
	}
	if l := judgeQuorum(ctx, time.Now(), nil); l.held || l.blind {
		t.Fatalf("no member at all: %+v", l)
	}
}
