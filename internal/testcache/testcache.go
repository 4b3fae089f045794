// Package testcache names the directory, outside any checkout, where the
// tests keep what they build once per machine: the Kubernetes components
// and sidecar images (deploy/e2e), the Debian roots of other Ceph
// releases (rados/radostest/cephcluster) and other Debian kernels
// (nbd/kernel/vmtest).
package testcache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Env names the environment variable that moves the cache.
const Env = "PURERBD_CACHE"

// DefaultDir is the cache without Env.
const DefaultDir = "/var/cache/purerbd"

// Dir returns $PURERBD_CACHE, or DefaultDir.
func Dir() string {
	if d := os.Getenv(Env); d != "" {
		return d
	}
	return DefaultDir
}

// RunScript runs a bash script the package embeds (one that fills the
// cache once) with args. On failure the error carries the last 4000
// bytes of its output, which is where the script says what went wrong.
func RunScript(ctx context.Context, script []byte, args ...string) error {
	cmd := exec.CommandContext(ctx, "bash", append([]string{"-s"}, args...)...)
	cmd.Stdin = bytes.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tail := out.String()
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return fmt.Errorf("%w:\n%s", err, strings.TrimSpace(tail))
	}
	return nil
}
