package cephcluster

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/purerbd/purerbd/internal/testcache"
)

// Ceph releases a cluster can run.
const (
	// ReleaseHost runs the host's own Ceph packages (Pacific on Debian 12).
	ReleaseHost = "host"
	// ReleaseReef runs Ceph 18.2 (Reef) from Debian trixie, out of a root
	// built once into the cache (see RootDir) and entered with chroot.
	ReleaseReef = "reef"
	// ReleaseTentacle runs Ceph 20.2 (Tentacle) from Debian sid, out of a
	// root built once into the cache (see RootDir) and entered with chroot.
	ReleaseTentacle = "tentacle"
)

// ReleaseEnv names the environment variable that picks the release when
// Options.Release is empty: "reef", "tentacle", or "host"/"pacific"/""
// for the host's packages.
const ReleaseEnv = "PURERBD_CEPH"

// CacheEnv names the environment variable holding the cache directory
// (default /var/cache/purerbd) under which roots/SUITE are built.
const CacheEnv = testcache.Env

// rootStamp marks a finished root and names its packages (written last by
// build-root.sh).
const rootStamp = ".purerbd-root-ok"

//go:embed roots/build-root.sh
var buildRootScript []byte

// releaseSuite maps a release to the Debian suite whose root holds it, or
// "" for the host's packages.
func releaseSuite(release string) (string, error) {
	switch release {
	case "", ReleaseHost, "pacific":
		return "", nil
	case ReleaseReef:
		return "trixie", nil
	case ReleaseTentacle:
		return "sid", nil
	}
	return "", fmt.Errorf("cephcluster: unknown Ceph release %q (want %s, %s or %s)", release, ReleaseHost, ReleaseReef, ReleaseTentacle)
}

// RootDir returns where the root of a Debian suite lives: under
// $PURERBD_CACHE (default /var/cache/purerbd), outside any checkout.
func RootDir(suite string) string {
	return filepath.Join(testcache.Dir(), "roots", suite)
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
	if rootReady(root) {
		return root, nil
	}
	fmt.Fprintf(os.Stderr, "cephcluster: building the %s root for Ceph %s in %s (once; takes minutes)\n", suite, release, root)
	if err := testcache.RunScript(ctx, buildRootScript, suite); err != nil {
		return "", fmt.Errorf("cephcluster: building the %s root for Ceph %s: %w", suite, release, err)
	}
	if !rootReady(root) {
		return "", fmt.Errorf("cephcluster: the %s root was built but its stamp does not name %q", suite, rootPackages())
	}
	return root, nil
}

// EnsureRootExtras is EnsureRoot, then the extra Debian packages pkgs
// (the benchmark suite's peers: fio, qemu-utils) installed into the root
// when they are not yet: build-root.sh records them apart from the
// stamp's package list, which stays what the tests check. It returns ""
// for the host's packages, into which it installs nothing.
func EnsureRootExtras(ctx context.Context, release string, pkgs ...string) (string, error) {
	root, err := EnsureRoot(ctx, release)
	if err != nil || root == "" || len(pkgs) == 0 {
		return root, err
	}
	suite, _ := releaseSuite(release)
	if err := testcache.RunScript(ctx, buildRootScript, append([]string{suite}, pkgs...)...); err != nil {
		return "", fmt.Errorf("cephcluster: installing %s into the %s root: %w", strings.Join(pkgs, " "), suite, err)
	}
	return root, nil
}

// rootPackages returns the package list build-root.sh installs (its
// packages="..." line).
func rootPackages() string {
	for line := range strings.Lines(string(buildRootScript)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "packages="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// rootReady reports whether root is finished with today's package list:
// its stamp names the list build-root.sh installs (a root of an older
// list gets the rest installed by the script).
func rootReady(root string) bool {
	b, err := os.ReadFile(filepath.Join(root, rootStamp))
	if err != nil {
		return false
	}
	want := "packages: " + rootPackages()
	for line := range strings.Lines(string(b)) {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}

// rootBinds are the host directories a chrooted daemon or tool sees at
// the same path inside the root: the temporary directory (where tests keep
// the files they hand to Ceph's tools) and the cluster dir when it lies
// elsewhere. Daemons and clients outside then agree on every path in
// ceph.conf and on the command line. /proc too: librbd's encryption
// (libcryptsetup) reaches the memfd holding a LUKS header through
// /proc/PID/fd.
func (c *Cluster) rootBinds() []string {
	tmp := filepath.Clean(os.TempDir())
	binds := []string{tmp, "/proc"}
	if rel, err := filepath.Rel(tmp, c.Dir); err != nil || strings.HasPrefix(rel, "..") {
		binds = append(binds, c.Dir)
	}
	return binds
}

// prepareRoot makes the mount points of rootBinds inside the root.
func (c *Cluster) prepareRoot() error {
	for _, b := range c.rootBinds() {
		if !filepath.IsAbs(b) {
			return fmt.Errorf("cephcluster: %q must be an absolute path to be seen from the root", b)
		}
		if err := os.MkdirAll(filepath.Join(c.root, b), 0o755); err != nil {
			return fmt.Errorf("cephcluster: %w", err)
		}
	}
	return nil
}

// chrootArgs returns the command (unshare) and arguments that run bin in
// the root: in a private mount namespace of its own, rootBinds are bind
// mounted into the root and the shell execs chroot, which execs bin, so
// the PID stays bin's. The mounts vanish with the process: nothing is
// left mounted on the host, and removing the cache never reaches host
// directories.
func (c *Cluster) chrootArgs(bin string, args []string) (string, []string) {
	var sb strings.Builder
	sb.WriteString("set -e\n")
	for _, b := range c.rootBinds() {
		fmt.Fprintf(&sb, "mount --bind %s %s\n", shellQuote(b), shellQuote(filepath.Join(c.root, b)))
	}
	sb.WriteString(`exec chroot "$@"` + "\n")
	return "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", sb.String(), "sh", c.root, bin}, args...)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
