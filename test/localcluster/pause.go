package localcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ensurePause builds the sandbox binary from this repository, cached by the
// hash of its source.
func (l Layout) ensurePause(ctx context.Context) (string, error) {
	src, err := os.ReadFile(filepath.Join(l.RepoRoot, "test", "localcluster", "pause", "main.go"))
	if err != nil {
		return "", fmt.Errorf("failed to read the pause source: %w", err)
	}
	sum := sha256.Sum256(src)
	dir := l.binCacheDir("pause-" + hex.EncodeToString(sum[:6]))
	out := filepath.Join(dir, "pause")
	if _, err := os.Stat(out); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out+".partial", "./test/localcluster/pause")
	cmd.Dir = l.RepoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build pause: %w: %s", err, b)
	}
	return dir, os.Rename(out+".partial", out)
}
