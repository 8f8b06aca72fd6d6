package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quorumctl/etcd-operator/internal/backup"
)

// ApplyArgs is the command line of restore apply, which runs in the etcd
// image of the cluster's version so that the restore is written by the
// etcdutl of the release that will open it.
type ApplyArgs struct {
	// Etcdutl is the etcdutl binary.
	Etcdutl string
	// DataDir and WorkDir as for fetch; the snapshot is WorkDir/snapshot.db.
	DataDir, WorkDir string
	// Name, InitialCluster, InitialClusterToken and PeerURL are the seed's:
	// the restore writes a membership of the seed alone.
	Name, InitialCluster, InitialClusterToken, PeerURL string
	BumpRevision                                       int64
	MarkCompacted                                      bool
}

// Args renders the command line.
func (a ApplyArgs) Args() []string {
	return []string{"restore", "apply",
		"--etcdutl=" + a.Etcdutl, "--data-dir=" + a.DataDir, "--work-dir=" + a.WorkDir,
		"--name=" + a.Name, "--initial-cluster=" + a.InitialCluster,
		"--initial-cluster-token=" + a.InitialClusterToken, "--initial-advertise-peer-urls=" + a.PeerURL,
		"--bump-revision=" + strconv.FormatInt(a.BumpRevision, 10),
		"--mark-compacted=" + strconv.FormatBool(a.MarkCompacted),
	}
}

func parseApply(args []string, env Env) (ApplyArgs, string, error) {
	var a ApplyArgs
	fs := newFlagSet("restore apply", env)
	fs.StringVar(&a.Etcdutl, "etcdutl", "/usr/local/bin/etcdutl", "the etcdutl binary")
	fs.StringVar(&a.DataDir, "data-dir", "", "etcd's data dir")
	fs.StringVar(&a.WorkDir, "work-dir", "", "the work dir fetch wrote the snapshot into")
	fs.StringVar(&a.Name, "name", "", "the seed's member name")
	fs.StringVar(&a.InitialCluster, "initial-cluster", "", "the seed alone, name=peerURL")
	fs.StringVar(&a.InitialClusterToken, "initial-cluster-token", "", "the new cluster's token")
	fs.StringVar(&a.PeerURL, "initial-advertise-peer-urls", "", "the seed's peer URL")
	fs.Int64Var(&a.BumpRevision, "bump-revision", 0, "etcdutl's --bump-revision")
	fs.BoolVar(&a.MarkCompacted, "mark-compacted", false, "etcdutl's --mark-compacted")
	logPath := terminationFlag(fs)
	err := parse(fs, args, func() error {
		if a.DataDir == "" || a.WorkDir == "" || a.Name == "" || a.InitialCluster == "" || a.InitialClusterToken == "" || a.PeerURL == "" {
			return fmt.Errorf("%w: --data-dir, --work-dir, --name, --initial-cluster, --initial-cluster-token and --initial-advertise-peer-urls are required", backup.ErrInvalidArguments)
		}
		if a.BumpRevision < 0 {
			return fmt.Errorf("%w: --bump-revision cannot be negative", backup.ErrInvalidArguments)
		}
		return nil
	})
	return a, *logPath, err
}

func runApply(ctx context.Context, args []string, env Env) (backup.Result, string) {
	a, logPath, err := parseApply(args, env)
	if err != nil {
		return backup.ResultOf(err), logPath
	}
	if !gateOpen(a.DataDir, env) {
		_, _ = fmt.Fprintln(env.Stdout, "the cluster exists or the data dir is in place; nothing to restore")
		return backup.Result{Code: backup.CodeOK, Skipped: true}, logPath
	}
	return backup.ResultOf(Apply(ctx, a, env.Stdout)), logPath
}

// Apply restores the fetched snapshot with etcdutl, which checks etcd's
// SHA-256 inside it again (no --skip-hash-check), into a directory beside
// the data dir, and moves the result into place whole: etcd never starts on
// a half-restored data dir, and the gate sees the data dir only once the
// restore is complete.
func Apply(ctx context.Context, a ApplyArgs, log io.Writer) error {
	snapshot := filepath.Join(a.WorkDir, SnapshotFile)
	if _, err := os.Stat(snapshot); err != nil {
		return fmt.Errorf("%w: no fetched snapshot at %s: %v", backup.ErrRestore, snapshot, err)
	}
	tmp := filepath.Join(a.WorkDir, restoringDir)
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("failed to clear %s: %w", tmp, err)
	}
	args := []string{"snapshot", "restore", snapshot,
		"--data-dir=" + tmp,
		"--name=" + a.Name,
		"--initial-cluster=" + a.InitialCluster,
		"--initial-cluster-token=" + a.InitialClusterToken,
		"--initial-advertise-peer-urls=" + a.PeerURL,
	}
	if a.BumpRevision > 0 {
		args = append(args, "--bump-revision="+strconv.FormatInt(a.BumpRevision, 10))
	}
	if a.MarkCompacted {
		args = append(args, "--mark-compacted")
	}
	cmd := exec.CommandContext(ctx, a.Etcdutl, args...)
	// etcd reads ETCD_* variables as flags, and the Pod has some (the
	// startup values); etcdutl is told everything on its command line.
	cmd.Env = cleanEnv(os.Environ())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, log), io.MultiWriter(&out, log)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: etcdutl snapshot restore: %v: %s", backup.ErrRestore, err, lastLines(out.String(), 5))
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, a.DataDir); err != nil {
		return fmt.Errorf("failed to move the restored data dir into place: %w", err)
	}
	if err := syncDir(filepath.Dir(a.DataDir)); err != nil {
		return err
	}
	// The snapshot is not needed any more, and it takes as much room as the
	// data dir.
	if err := os.RemoveAll(a.WorkDir); err != nil {
		_, _ = fmt.Fprintf(log, "warning: failed to remove %s: %v\n", a.WorkDir, err)
	}
	_, _ = fmt.Fprintf(log, "restored into %s\n", a.DataDir)
	return nil
}

func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "ETCD_") && !strings.HasPrefix(kv, "BACKUP_") {
			out = append(out, kv)
		}
	}
	return out
}

// syncTree makes everything etcdutl wrote durable before the rename makes
// it the data dir.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("failed to sync %s: %w", p, err)
		}
		return nil
	})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("failed to sync %s: %w", dir, err)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
