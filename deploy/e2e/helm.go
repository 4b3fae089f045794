package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/purerbd/purerbd/deploy/e2e/images"
)

// helmVersion is the Helm release the chart is tested with: built from
// its Go module (the module proxy serves helm.sh/helm/v3).
const helmVersion = "v3.22.0"

// HelmBinary returns helm built from helm.sh/helm/v3 at helmVersion,
// building it into the cache when it is missing (minutes from an empty Go
// build cache; a no-op after). Concurrent callers wait for one build.
func HelmBinary(ctx context.Context, log io.Writer) (string, error) {
	dir := filepath.Join(images.DefaultCacheDir(), "helm", helmVersion)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("helm: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("helm: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("helm: lock: %w", err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	fmt.Fprintf(log, "e2e: building helm %s into %s (once)\n", helmVersion, dir)
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("helm: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", "-ldflags=-s -w", "helm.sh/helm/v3/cmd/helm@"+helmVersion)
	cmd.Dir = tmp // outside any module: go install of a version
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOBIN="+tmp, "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("helm: go install helm.sh/helm/v3/cmd/helm@%s: %w", helmVersion, err)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		return "", fmt.Errorf("helm: %w", err)
	}
	return bin, nil
}
