// Package images builds every container image the e2e Kubernetes run
// uses, since no registry can be reached: purerbd-csi from this checkout,
// the CSI sidecars and the snapshot-controller from their pinned sources
// (the deploy/e2e/sidecars module), a pause image for pod sandboxes and
// the test workload. Each image is FROM scratch, built with docker and
// saved as a docker-archive tar that `ctr images import` loads, tagged
// exactly as the shipped manifests name it, so that they apply unchanged.
// Build also extracts the snapshot CRDs and the snapshot-controller's
// manifests from the same pinned sources.
//
// Everything lands under CACHE/e2e (CACHE being ${PURERBD_CACHE:-
// /var/cache/purerbd}): the sidecars once per set of versions, the
// images built from the checkout on every Build, in a directory of
// their own per checkout. A lock file serializes concurrent builders.
package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/purerbd/purerbd/internal/testcache"
)

// The references of the images Build makes besides those the manifests
// name.
const (
	// PauseRef is the pod sandbox image: containerd's sandbox_image.
	PauseRef = "registry.k8s.io/pause:3.10"
	// WorkloadRef is the test workload: busybox and /bin/workload.
	WorkloadRef = "purerbd.test/workload:1"
)

// CacheEnv names the environment variable holding the cache root; see
// DefaultCacheDir.
const CacheEnv = testcache.Env

// DefaultCacheDir returns $PURERBD_CACHE, or /var/cache/purerbd.
func DefaultCacheDir() string { return testcache.Dir() }

// Image is one built image: its reference (as the manifests name it)
// and the docker-archive tar holding it.
type Image struct {
	Ref string `json:"ref"`
	Tar string `json:"tar"`
}

// Step is one stage of a Build and how long it took.
type Step struct {
	Name   string        `json:"name"`
	Took   time.Duration `json:"took"`
	Cached bool          `json:"cached,omitempty"`
}

// Set is what Build produced.
type Set struct {
	// Images holds every image: purerbd-csi, the sidecars and the
	// snapshot-controller, pause, workload.
	Images []Image `json:"images"`
	// SnapshotCRDs are the snapshot.storage.k8s.io CRDs
	// (VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshot), then
	// the groupsnapshot.storage.k8s.io ones (VolumeGroupSnapshotClass,
	// VolumeGroupSnapshotContent, VolumeGroupSnapshot), to apply before
	// anything that uses them.
	SnapshotCRDs []string `json:"snapshotCRDs"`
	// SnapshotController are the upstream snapshot-controller manifests
	// (RBAC, then the Deployment, in kube-system), with the image
	// reference set to the one Build made and group snapshots turned on.
	SnapshotController []string `json:"snapshotController"`
	// SnapshotMetadataCRD is the SnapshotMetadataService CRD
	// (cbt.storage.k8s.io), the cluster add-on changed-block tracking
	// needs.
	SnapshotMetadataCRD string `json:"snapshotMetadataCRD"`
	// SnapshotMetadataClientRole is upstream's ClusterRole for backup
	// applications that read snapshot metadata.
	SnapshotMetadataClientRole string `json:"snapshotMetadataClientRole"`
	// SnapshotMetadataLister is the reference of the image holding
	// upstream's example backup client, snapshot-metadata-lister.
	SnapshotMetadataLister string `json:"snapshotMetadataLister"`
	// Steps says what took how long.
	Steps []Step `json:"steps"`
}

// Tar returns the tar of the image ref, or "".
func (s *Set) Tar(ref string) string {
	for _, im := range s.Images {
		if im.Ref == ref {
			return im.Tar
		}
	}
	return ""
}

// Build makes every image that is missing under cacheDir/e2e from the
// checkout at repoRoot: the sidecars only when their versions have none
// yet, purerbd-csi, pause and workload every time.
func Build(ctx context.Context, log *slog.Logger, repoRoot, cacheDir string) (*Set, error) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return nil, fmt.Errorf("images: repo root: %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "kubernetes")); err != nil {
		return nil, fmt.Errorf("images: %s is not a purerbd checkout: %w", root, err)
	}
	dir := filepath.Join(cacheDir, "e2e")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("images: cache: %w", err)
	}
	unlock, err := lock(ctx, log, filepath.Join(dir, "build.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	refs, err := manifestRefs(root)
	if err != nil {
		return nil, err
	}
	b := &builder{log: log, root: root, cache: dir, set: &Set{}}
	if err := b.sidecars(ctx, refs); err != nil {
		return nil, err
	}
	if err := b.checkoutImages(ctx, refs.plugin); err != nil {
		return nil, err
	}
	return b.set, nil
}

// builder carries one Build's state.
type builder struct {
	log   *slog.Logger
	root  string // the checkout
	cache string // CACHE/e2e
	set   *Set
}

// step runs fn as the named stage, logging and recording its time.
func (b *builder) step(name string, fn func() (cached bool, err error)) error {
	start := time.Now()
	cached, err := fn()
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("images: %s: %w", name, err)
	}
	b.set.Steps = append(b.set.Steps, Step{Name: name, Took: took, Cached: cached})
	b.log.Info("images: step done", "step", name, "took", took.Round(time.Millisecond), "cached", cached)
	return nil
}

// checkoutDir returns the directory of the images built from the
// checkout at root: one per checkout, so worktrees sharing the cache do
// not overwrite each other's tars.
func checkoutDir(cache, root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(cache, "checkouts", filepath.Base(root)+"-"+hex.EncodeToString(sum[:4]))
}

// replaceFile moves tmp to path, removing tmp if that fails.
func replaceFile(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
