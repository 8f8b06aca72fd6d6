//go:build integration

package backup_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/s3proc"
)

// BenchmarkSaveToS3 streams the snapshot of a one-member etcd, filled with
// BENCH_SAVE_MIB MiB (256 by default) of random values, into versitygw on
// loopback, with each compression, beside etcdctl snapshot save of the
// same member to a local file: the bench-backup comparison without a
// cluster, Pods or their network. Besides the rate of etcd's stream it
// reports the CPU seconds each process spent per snapshot (etcd sending,
// the agent, which is this process, and the S3 server), which is where a
// two-core machine's time goes. With BENCH_SAVE_PROFILE set to a
// directory, it writes a CPU profile of each Save there
// (save-None.pprof, save-Zstd.pprof), of Save alone, not of the fill;
// BENCH_SAVE_VERSITYGW names another versitygw binary to run.
//
//	go test -tags integration -run XXX -bench SaveToS3 -benchtime 1x ./test/backup/
func BenchmarkSaveToS3(b *testing.B) {
	mib := 256
	if v := os.Getenv("BENCH_SAVE_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("BENCH_SAVE_MIB: %v", err)
		}
		mib = n
	}
	profiles := os.Getenv("BENCH_SAVE_PROFILE")
	// The cached versitygw is built without symbols; one built with them
	// lets perf record -p name where the server's CPU goes.
	gw := os.Getenv("BENCH_SAVE_VERSITYGW")
	if gw == "" {
		gw = s3proc.Binary(b)
	}
	s3 := s3proc.Start(b, gw, bucket)
	bin := etcdproc.Binary(b, "")
	source := etcdproc.StartCluster(b, bin, etcdproc.Options{Members: 1, Args: []string{"--quota-backend-bytes=" + strconv.Itoa(4<<30)}})
	member := source[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	fillRandom(ctx, b, member.ClientURL, int64(mib)<<20)
	st := s3Store(b, s3, bucket, s3.SecretAccessKey)

	cpu := func() [3]time.Duration {
		var self syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
			b.Fatal(err)
		}
		return [3]time.Duration{processCPU(b, member.PID()),
			time.Duration(self.Utime.Nano() + self.Stime.Nano()), processCPU(b, s3.PID())}
	}
	report := func(b *testing.B, before [3]time.Duration) {
		after := cpu()
		for i, name := range []string{"etcd-cpu-s/op", "agent-cpu-s/op", "s3-cpu-s/op"} {
			b.ReportMetric((after[i]-before[i]).Seconds()/float64(b.N), name)
		}
	}

	b.Run("etcdctl", func(b *testing.B) {
		etcdctl := filepath.Join(filepath.Dir(bin), "etcdctl")
		before := cpu()
		for i := range b.N {
			file := filepath.Join(b.TempDir(), fmt.Sprintf("snap-%d.db", i))
			if out, err := exec.CommandContext(ctx, etcdctl, "--endpoints="+member.ClientURL, "snapshot", "save", file).CombinedOutput(); err != nil {
				b.Fatalf("etcdctl snapshot save: %v\n%s", err, out)
			}
			fi, err := os.Stat(file)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(fi.Size())
		}
		// etcdctl's own CPU is in no column: it is a child, not this
		// process, and it only writes a file.
		report(b, before)
	})
	for _, comp := range []v1alpha1.SnapshotCompression{v1alpha1.CompressionNone, v1alpha1.CompressionZstd} {
		b.Run(string(comp), func(b *testing.B) {
			before := cpu()
			for i := range b.N {
				key := backup.SnapshotKey("bench", "source", fmt.Sprintf("%s-%d-%d", strings.ToLower(string(comp)), time.Now().UnixNano(), i))
				a := agent.SaveArgs{Namespace: "bench", Cluster: "source", Snapshot: "snap", Endpoints: []string{member.ClientURL},
					StorageArgs: agent.StorageArgs{Key: key, Destination: v1alpha1.SnapshotDestination{Compression: comp}}}
				stop := startProfile(b, profiles, "save-"+string(comp)+".pprof")
				meta, err := agent.Save(ctx, st, etcd.NewDialer(), a, io.Discard)
				stop()
				if err != nil {
					b.Fatalf("save: %v", err)
				}
				b.SetBytes(meta.DBSizeBytes + backup.TrailerSize)
			}
			report(b, before)
		})
	}
}

// startProfile profiles this process's CPU into dir/name until the
// returned func is called; with no dir it does nothing.
func startProfile(b *testing.B, dir, name string) func() {
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// processCPU is the user and system CPU time of another process, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s, Linux's
// USER_HZ).
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces; fields count
	// from after it (state is field 3).
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// fillRandom writes size bytes of incompressible 512 KiB values from four
// writers, as bench-backup fills its cluster.
func fillRandom(ctx context.Context, b *testing.B, endpoint string, size int64) {
	cli := rawClient(b, endpoint)
	const valueSize = 512 << 10
	n := size / valueSize
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w := range errs {
		wg.Go(func() {
			value := make([]byte, valueSize)
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				_, _ = rand.Read(value)
				if _, err := cli.Put(ctx, fmt.Sprintf("/bench/%08d", i), string(value)); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
