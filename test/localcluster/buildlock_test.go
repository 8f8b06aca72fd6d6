package localcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The lock must hold against another process, which is where the cold-cache
// race was: parallel go test packages are separate processes.
func TestLockFileExcludesAnotherProcess(t *testing.T) {
	if os.Getenv("LOCKFILE_HELPER") != "" {
		unlock, err := lockFile(context.Background(), os.Getenv("LOCKFILE_HELPER"))
		if err != nil {
			os.Exit(3)
		}
		defer unlock()
		_, _ = os.Stdout.WriteString("locked\n")
		time.Sleep(time.Hour) // held until the parent kills this process
		return
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockFileExcludesAnotherProcess$")
	cmd.Env = append(os.Environ(), "LOCKFILE_HELPER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("helper did not take the lock: %q %v", buf, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if unlock, err := lockFile(ctx, path); err == nil {
		unlock()
		t.Fatal("took the lock while another process held it")
	}

	// The kernel releases a dead holder's lock, so a killed build never
	// leaves the cache locked.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	unlock, err := lockFile(ctx2, path)
	if err != nil {
		t.Fatalf("lock not free after its holder died: %v", err)
	}
	unlock()
}
