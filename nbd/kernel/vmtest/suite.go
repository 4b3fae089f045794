package vmtest

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/testcache"
)

// KernelEnv names the environment variable that picks the guest's
// kernel: "" or "bookworm" for the host's own (/boot, /lib/modules), or
// another Debian suite ("trixie", "sid") whose linux-image-amd64 is
// fetched once into the cache (see EnsureSuiteKernel) without
// installing anything on the host.
const KernelEnv = "PURERBD_KERNEL"

// CacheEnv names the environment variable holding the cache directory
// (default /var/cache/purerbd) under which kernels/SUITE are fetched.
const CacheEnv = testcache.Env

// kernelStamp marks a finished kernel tree (written last by
// fetch-kernel.sh).
const kernelStamp = ".purerbd-kernel-ok"

//go:embed kernels/fetch-kernel.sh
var fetchKernelScript []byte

// hostSuite is the Debian suite of the host's own kernel.
const hostSuite = "bookworm"

// KernelSuite returns the suite KernelEnv asks for ("" for the host's
// kernel).
func KernelSuite() (string, error) {
	s := strings.TrimSpace(os.Getenv(KernelEnv))
	switch s {
	case "", hostSuite, "host":
		return "", nil
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return "", fmt.Errorf("vmtest: %s=%q is no Debian suite name", KernelEnv, s)
		}
	}
	return s, nil
}

// KernelTree returns where a suite's kernel is unpacked: under
// $PURERBD_CACHE (default /var/cache/purerbd), outside any checkout.
func KernelTree(suite string) string {
	return filepath.Join(testcache.Dir(), "kernels", suite)
}

// EnsureSuiteKernel returns the root of the unpacked kernel packages of
// a Debian suite (boot/vmlinuz-<release>, lib/modules/<release> with a
// modules.dep), fetching them first when missing: apt downloads with its
// own sources list and state under the cache, dpkg-deb unpacks, depmod
// indexes; the modules stay compressed as the package ships them.
func EnsureSuiteKernel(ctx context.Context, suite string) (string, error) {
	tree := KernelTree(suite)
	if _, err := os.Stat(filepath.Join(tree, kernelStamp)); err != nil {
		fmt.Fprintf(os.Stderr, "vmtest: fetching the %s kernel into %s (once)\n", suite, tree)
		if err := testcache.RunScript(ctx, fetchKernelScript, suite); err != nil {
			return "", fmt.Errorf("vmtest: fetching the %s kernel: %w", suite, err)
		}
		if _, err := os.Stat(filepath.Join(tree, kernelStamp)); err != nil {
			return "", fmt.Errorf("vmtest: the %s kernel was fetched but has no stamp: %w", suite, err)
		}
	}
	return filepath.Join(tree, "root"), nil
}

// findSuiteKernel fills h's kernel from the suite KernelEnv names,
// failing tb when it cannot be had.
func findSuiteKernel(tb testing.TB, h *Host, suite string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := EnsureSuiteKernel(ctx, suite)
	if err != nil {
		tb.Fatal(err)
	}
	kernel, rel, dir := newestKernel(filepath.Join(root, "boot"), filepath.Join(root, "lib", "modules"))
	if kernel == "" {
		tb.Fatalf("vmtest: the %s kernel tree %s has no boot/vmlinuz-<release> with lib/modules/<release>/modules.dep: remove it and run again", suite, root)
	}
	h.Kernel, h.Release, h.ModulesDir, h.Suite = kernel, rel, dir, suite
}
