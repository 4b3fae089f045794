package cephcluster

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Ceph releases a cluster can run.
const (
	// ReleaseHost runs the host's own Ceph packages (Pacific on Debian 12).
	ReleaseHost = "host"
	// ReleaseTentacle runs Ceph 20.2 (Tentacle) from Debian sid, out of a
	// root built once into the cache (see RootDir) and entered with chroot.
	ReleaseTentacle = "tentacle"
)

// ReleaseEnv names the environment variable that picks the release when
// Options.Release is empty: "tentacle", or "host"/"pacific"/"" for the
// host's packages.
const ReleaseEnv = "PURERBD_CEPH"

// CacheEnv names the environment variable holding the cache directory
// (default /var/cache/purerbd) under which roots/SUITE are built.
const CacheEnv = "PURERBD_CACHE"

// rootStamp marks a finished root (written last by build-root.sh).
const rootStamp = ".purerbd-root-ok"

//go:embed roots/build-root.sh
var buildRootScript []byte

// releaseSuite maps a release to the Debian suite whose root holds it, or
// "" for the host's packages.
func releaseSuite(release string) (string, error) {
	switch release {
	case "", ReleaseHost, "pacific":
		return "", nil
	case ReleaseTentacle:
		return "sid", nil
	}
	return "", fmt.Errorf("cephcluster: unknown Ceph release %q (want %s or %s)", release, ReleaseHost, ReleaseTentacle)
}

// RootDir returns where the root of a Debian suite lives: under
// $PURERBD_CACHE (default /var/cache/purerbd), outside any checkout.
func RootDir(suite string) string {
	cache := os.Getenv(CacheEnv)
	if cache == "" {
		cache = "/var/cache/purerbd"
	}
	return filepath.Join(cache, "roots", suite)
}

// EnsureRoot returns the root holding release's binaries, building it
// first (debootstrap, then apt inside it: minutes, once per machine) when
// it is missing. It returns "" for the host's packages.
func EnsureRoot(ctx context.Context, release string) (string, error) {
	suite, err := releaseSuite(release)
	if err != nil || suite == "" {
		return "", err
	}
	root := RootDir(suite)
	if _, err := os.Stat(filepath.Join(root, rootStamp)); err == nil {
		return root, nil
	}
	fmt.Fprintf(os.Stderr, "cephcluster: building the %s root for Ceph %s in %s (once; takes minutes)\n", suite, release, root)
	cmd := exec.CommandContext(ctx, "bash", "-s", suite)
	cmd.Stdin = bytes.NewReader(buildRootScript)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tail := out.String()
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return "", fmt.Errorf("cephcluster: building the %s root for Ceph %s: %w:\n%s", suite, release, err, strings.TrimSpace(tail))
	}
	if _, err := os.Stat(filepath.Join(root, rootStamp)); err != nil {
		return "", fmt.Errorf("cephcluster: the %s root was built but has no stamp: %w", suite, err)
	}
	return root, nil
}

// placeDirInRoot makes dir reachable under the same path inside root and
// outside it: the real directory is root+dir and dir becomes a symlink to
// it. Daemons in the chroot and clients outside then agree on every path
// in ceph.conf, with no bind mount to clean up.
func placeDirInRoot(root, dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("cephcluster: cluster dir %q must be absolute to live in a root", dir)
	}
	inside := filepath.Join(root, dir)
	if err := os.MkdirAll(inside, 0o700); err != nil {
		return fmt.Errorf("cephcluster: %w", err)
	}
	if fi, err := os.Lstat(dir); err == nil {
		if fi.Mode()&os.ModeSymlink == 0 {
			// an empty directory (os.MkdirTemp's) gives way to the link
			if err := os.Remove(dir); err != nil {
				return fmt.Errorf("cephcluster: cluster dir %s must be empty to live in a root: %w", dir, err)
			}
		} else if err := os.Remove(dir); err != nil {
			return fmt.Errorf("cephcluster: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cephcluster: %w", err)
	}
	if err := os.Symlink(inside, dir); err != nil {
		return fmt.Errorf("cephcluster: %w", err)
	}
	return nil
}

// removeDirInRoot removes what placeDirInRoot made.
func removeDirInRoot(root, dir string) error {
	return errors.Join(os.Remove(dir), os.RemoveAll(filepath.Join(root, dir)))
}

// rootTCMalloc finds libtcmalloc.so.4 inside root and returns its path as
// seen from inside.
func rootTCMalloc(root string) (string, error) {
	for _, g := range []string{"/usr/lib/*-linux-gnu/libtcmalloc.so.4", "/usr/lib64/libtcmalloc.so.4"} {
		if m, _ := filepath.Glob(filepath.Join(root, g)); len(m) > 0 {
			return strings.TrimPrefix(m[0], root), nil
		}
	}
	return "", fmt.Errorf("cephcluster: libtcmalloc.so.4 not found in %s; set Options.GlibcMalloc", root)
}
