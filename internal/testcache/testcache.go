// Package testcache names the directory, outside any checkout, where the
// tests keep what they build once per machine: the Kubernetes components
// and sidecar images (deploy/e2e), the Debian roots of other Ceph
// releases (rados/radostest/cephcluster) and other Debian kernels
// (nbd/kernel/vmtest).
package testcache

import "os"

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
