//go:build integration

package backup_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/agent"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/test/etcdproc"
	"github.com/quorumctl/etcd-operator/test/s3proc"
)

// BenchmarkRestoreFromS3 is the download half of BenchmarkSaveToS3: one
// snapshot of an etcd filled with BENCH_SAVE_MIB MiB (256 by default) of
// random values is saved into versitygw on loopback with each compression,
// plain and encrypted, and then fetched as the seed's first init container
// does (agent.Fetch: download, the stored object's SHA-256, age, zstd,
// etcd's digest, the file for etcdutl). The rate is of etcd's stream (the
// database and its digest, as for the save), not of the stored object.
// "download" is the floor: the object copied from the store to a file,
// nothing checked. Besides the rate it reports the CPU seconds of the
// agent (this process) and the S3 server per fetch; with
// BENCH_RESTORE_PROFILE set to a directory it writes a CPU profile of each
// Fetch there (fetch-None.pprof, ...).
//
//	go test -tags integration -run XXX -bench RestoreFromS3 -benchtime 3x ./test/backup/
func BenchmarkRestoreFromS3(b *testing.B) {
	mib := 256
	if v := os.Getenv("BENCH_SAVE_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("BENCH_SAVE_MIB: %v", err)
		}
		mib = n
	}
	profiles := os.Getenv("BENCH_RESTORE_PROFILE")
	s3 := s3proc.Start(b, s3proc.Binary(b), bucket)
	bin := etcdproc.Binary(b, "")
	source := etcdproc.StartCluster(b, bin, etcdproc.Options{Members: 1, Args: []string{"--quota-backend-bytes=" + strconv.Itoa(4<<30)}})
	member := source[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	fillRandom(ctx, b, member.ClientURL, int64(mib)<<20)
	st := s3Store(b, s3, bucket, s3.SecretAccessKey)

	dir := b.TempDir()
	key, identity, err := crypt.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string][]byte{"recipient": []byte(key.Recipient() + "\n"), "identity": identity} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o400); err != nil {
			b.Fatal(err)
		}
	}
	keyFile := func(name string) agent.KeyFile {
		return agent.KeyFile{Ref: "snapshot-key/" + name, Path: filepath.Join(dir, name)}
	}

	type variant struct {
		name        string
		compression v1alpha1.SnapshotCompression
		encrypted   bool
	}
	variants := []variant{
		{"None", v1alpha1.CompressionNone, false},
		{"Zstd", v1alpha1.CompressionZstd, false},
		{"None+Age", v1alpha1.CompressionNone, true},
		{"Zstd+Age", v1alpha1.CompressionZstd, true},
	}
	saved := map[string]*backup.Metadata{}
	for _, v := range variants {
		a := agent.SaveArgs{Namespace: "bench", Cluster: "source", Snapshot: "snap", Endpoints: []string{member.ClientURL},
			StorageArgs: agent.StorageArgs{Key: backup.SnapshotKey("bench", "source", "restore-"+v.name),
				Destination: v1alpha1.SnapshotDestination{Compression: v.compression}}}
		if v.encrypted {
			a.Destination.Encryption = &v1alpha1.SnapshotEncryption{}
			a.EncryptionKey = keyFile("recipient")
		}
		meta, err := agent.Save(ctx, st, etcd.NewDialer(), a, io.Discard)
		if err != nil {
			b.Fatalf("save %s: %v", v.name, err)
		}
		saved[v.name] = meta
	}
	// etcd has nothing more to do; stopped, it takes no CPU from the fetches.
	for _, m := range source {
		m.Stop()
	}

	cpu := func() [2]time.Duration {
		var self syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
			b.Fatal(err)
		}
		return [2]time.Duration{time.Duration(self.Utime.Nano() + self.Stime.Nano()), processCPU(b, s3.PID())}
	}
	report := func(b *testing.B, before [2]time.Duration) {
		after := cpu()
		for i, name := range []string{"agent-cpu-s/op", "s3-cpu-s/op"} {
			b.ReportMetric((after[i]-before[i]).Seconds()/float64(b.N), name)
		}
	}

	b.Run("download", func(b *testing.B) {
		meta := saved["None"]
		before := cpu()
		for range b.N {
			src, err := st.Reader(ctx, meta.Key)
			if err != nil {
				b.Fatal(err)
			}
			f, err := os.Create(filepath.Join(b.TempDir(), "object"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(f, src); err != nil {
				b.Fatal(err)
			}
			_ = src.Close()
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			_ = f.Close()
			b.SetBytes(meta.DBSizeBytes + backup.TrailerSize)
		}
		report(b, before)
	})
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			meta := saved[v.name]
			before := cpu()
			for range b.N {
				work := b.TempDir()
				a := agent.FetchArgs{StorageArgs: agent.StorageArgs{Key: meta.Key}, SHA256: meta.SHA256, Size: meta.SizeBytes,
					Compression: meta.Compression, Encryption: meta.Encryption, KeyFingerprint: meta.KeyFingerprint,
					DataDir: filepath.Join(work, "data"), WorkDir: filepath.Join(work, "restore")}
				if v.encrypted {
					a.EncryptionKey = keyFile("identity")
				}
				stop := startProfile(b, profiles, fmt.Sprintf("fetch-%s.pprof", v.name))
				err := agent.Fetch(ctx, st, a, io.Discard)
				stop()
				if err != nil {
					b.Fatalf("fetch %s: %v", v.name, err)
				}
				b.SetBytes(meta.DBSizeBytes + backup.TrailerSize)
			}
			report(b, before)
		})
	}
}
