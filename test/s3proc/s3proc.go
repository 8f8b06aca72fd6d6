// Package s3proc runs a real S3 server, versitygw over a directory (its
// POSIX backend), as a process on loopback, for tests that need S3 but no
// Kubernetes. The binary is the local cluster's, from its cache (see
// localcluster.Layout.VersityGWBinary): the very build the cluster runs.
//
// The package is test infrastructure: nothing in the product imports it.
package s3proc

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/test/localcluster"
	"github.com/quorumctl/etcd-operator/test/ports"
)

// Server is one running versitygw.
type Server struct {
	Endpoint        string
	AccessKeyID     string
	SecretAccessKey string
	// Dir is the backend directory: each bucket is a directory in it, each
	// object a file.
	Dir     string
	LogFile string

	cmd    *exec.Cmd
	exited chan struct{}
}

// Binary returns the versitygw binary, building it into the shared cache if
// it is not there. A test that cannot get it fails; it never skips.
func Binary(t testing.TB) string {
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
	bin, err := layout.VersityGWBinary(context.Background(), localcluster.NewProgress(testWriter{t}))
	if err != nil {
		t.Fatalf("failed to get the versitygw binary: %v", err)
	}
	return bin
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Start runs a server with the given buckets and stops it when the test ends.
func Start(t testing.TB, bin string, buckets ...string) *Server {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Reserve(t, 1)[0]))
	s := &Server{
		Endpoint:        "http://" + addr,
		AccessKeyID:     "s3proc",
		SecretAccessKey: "s3proc-secret-access-key",
		Dir:             filepath.Join(t.TempDir(), "s3"),
		LogFile:         filepath.Join(t.ArtifactDir(), "versitygw-"+strings.ReplaceAll(addr, ":", "-")+".log"),
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(s.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, "--port", addr, "posix", s.Dir)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKeyID, "ROOT_SECRET_ACCESS_KEY="+s.SecretAccessKey)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("failed to start versitygw: %v", err)
	}
	s.exited = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		_ = log.Close()
		close(s.exited)
	}()
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for _, b := range buckets {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := localcluster.CreateBucket(ctx, s.Endpoint, s.AccessKeyID, s.SecretAccessKey, b)
			cancel()
			if err == nil {
				break
			}
			select {
			case <-s.exited:
				t.Fatalf("versitygw exited: %v\n%s", err, s.LogTail(20))
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("failed to create bucket %s: %v\n%s", b, err, s.LogTail(20))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return s
}

// Stop ends the server.
func (s *Server) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// ObjectPath is where the backend keeps an object.
func (s *Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}

// LogTail returns the last lines of the server's log.
func (s *Server) LogTail(lines int) string {
	f, err := os.Open(s.LogFile)
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

// String names the server in test output.
func (s *Server) String() string { return fmt.Sprintf("versitygw at %s over %s", s.Endpoint, s.Dir) }

// PID is the server's process ID, for a benchmark that reads its CPU time.
func (s *Server) PID() int { return s.cmd.Process.Pid }
