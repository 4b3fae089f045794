package images

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the checkout these tests run in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := FindRepoRoot(".")
	require.NoError(t, err)
	return root
}

// TestManifestsMatchSidecars checks that the images the shipped
// manifests name are exactly those Build makes: purerbd-csi, and each
// sidecar at the version deploy/e2e/sidecars pins.
func TestManifestsMatchSidecars(t *testing.T) {
	root := repoRoot(t)
	refs, err := manifestRefs(root)
	require.NoError(t, err)
	chart, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "purerbd-csi", "Chart.yaml"))
	require.NoError(t, err)
	appVersion := regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?\s*$`).FindSubmatch(chart)
	require.NotNil(t, appVersion, "Chart.yaml has no appVersion")
	assert.Equal(t, "purerbd/purerbd-csi:"+string(appVersion[1]), refs.plugin,
		"the manifests pin the release the Helm chart is (Chart.yaml appVersion)")
	assert.Equal(t, map[string]string{
		"csi-provisioner": "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0",
		"csi-snapshotter": "registry.k8s.io/sig-storage/csi-snapshotter:v8.6.0",
		"csi-resizer":     "registry.k8s.io/sig-storage/csi-resizer:v2.2.0",
		// the snapshot-metadata component's
		"csi-snapshot-metadata": "registry.k8s.io/sig-storage/csi-snapshot-metadata:v0.2.0",
	}, refs.others)

	cmds, name, err := sidecarPlan(root)
	require.NoError(t, err)
	require.NoError(t, checkSidecarRefs(cmds, refs))
	got := map[string]string{}
	for _, c := range cmds {
		got[c.pkg] = c.ref()
	}
	assert.Equal(t, map[string]string{
		"github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner":          "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0",
		"github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter":          "registry.k8s.io/sig-storage/csi-snapshotter:v8.6.0",
		"github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller":      "registry.k8s.io/sig-storage/snapshot-controller:v8.6.0",
		"github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer":                  "registry.k8s.io/sig-storage/csi-resizer:v2.2.0",
		"github.com/kubernetes-csi/external-snapshot-metadata/cmd/csi-snapshot-metadata": "registry.k8s.io/sig-storage/csi-snapshot-metadata:v0.2.0",
		// no upstream image: a local name
		"github.com/kubernetes-csi/external-snapshot-metadata/examples/snapshot-metadata-lister": "purerbd-e2e/snapshot-metadata-lister:v0.2.0",
	}, got)
	assert.Regexp(t, `^sidecars-provisioner-v6\.3\.0-snapshotter-v8\.6\.0-resizer-v2\.2\.0-snapshotmetadata-v0\.2\.0-lister-v0\.2\.0-[0-9a-f]{8}$`, name)

	// a manifest naming another tag, or an image nothing builds
	bad := manifestImages{plugin: refs.plugin, others: map[string]string{"csi-resizer": "registry.k8s.io/sig-storage/csi-resizer:v2.2.1"}}
	assert.ErrorContains(t, checkSidecarRefs(cmds, bad), "pins registry.k8s.io/sig-storage/csi-resizer:v2.2.0")
	bad.others = map[string]string{"csi-attacher": "registry.k8s.io/sig-storage/csi-attacher:v4.0.0"}
	assert.ErrorContains(t, checkSidecarRefs(cmds, bad), "does not build")
}

// TestKustomizationListsManifests checks that deploy/kubernetes's
// kustomization holds exactly the manifests of the directory, so that
// `kubectl apply -k` installs what the README's file table lists.
func TestKustomizationListsManifests(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "kubernetes")
	k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	_, res, ok := strings.Cut(string(k), "\nresources:\n")
	require.True(t, ok, "kustomization.yaml has no resources list")
	var listed []string
	for _, l := range strings.Split(res, "\n") {
		item, ok := strings.CutPrefix(strings.TrimSpace(l), "- ")
		if !ok {
			break
		}
		listed = append(listed, item)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	assert.ElementsMatch(t, want, listed)
}

func TestRequiredVersion(t *testing.T) {
	gomod := []byte("module x\n\nrequire (\n\tgithub.com/a/b/v2 v2.1.0\n\tgithub.com/a/b v1.0.0 // indirect\n)\n\nrequire github.com/c/d v0.3.0\n")
	for mod, want := range map[string]string{"github.com/a/b/v2": "v2.1.0", "github.com/a/b": "v1.0.0", "github.com/c/d": "v0.3.0"} {
		v, err := requiredVersion(gomod, mod)
		require.NoError(t, err)
		assert.Equal(t, want, v, mod)
	}
	_, err := requiredVersion(gomod, "github.com/a")
	assert.Error(t, err)
}

func TestSetImage(t *testing.T) {
	in := "spec:\n  containers:\n    - name: snapshot-controller\n      image: registry.k8s.io/sig-storage/snapshot-controller:v8.5.0\n      args: [\"--v=5\"]\n    - image: \"registry.k8s.io/sig-storage/snapshot-controller:v8.4.0\"\n"
	out, err := setImage([]byte(in), "registry.k8s.io/sig-storage/snapshot-controller", "registry.k8s.io/sig-storage/snapshot-controller:v8.6.0")
	require.NoError(t, err)
	assert.Equal(t, strings.NewReplacer("v8.5.0", "v8.6.0", "\"registry.k8s.io/sig-storage/snapshot-controller:v8.4.0\"", "registry.k8s.io/sig-storage/snapshot-controller:v8.6.0").Replace(in), string(out))
	_, err = setImage([]byte(in), "registry.k8s.io/sig-storage/csi-resizer", "x:1")
	assert.Error(t, err)
	assert.Equal(t, "github.com/kubernetes-csi/external-provisioner", repoOf("github.com/kubernetes-csi/external-provisioner/v6"))
	assert.Equal(t, "github.com/a/b", repoOf("github.com/a/b"))
}

func TestAddArg(t *testing.T) {
	in := "          args:\n            - \"--v=5\"\n            # end snapshot controller args\n          imagePullPolicy: IfNotPresent\n"
	out, err := addArg([]byte(in), controllerArgsEnd, groupSnapshotGate)
	require.NoError(t, err)
	assert.Equal(t, "          args:\n            - \"--v=5\"\n            - \"--feature-gates=CSIVolumeGroupSnapshot=true\"\n            # end snapshot controller args\n          imagePullPolicy: IfNotPresent\n", string(out))
	_, err = addArg([]byte("args: []\n"), controllerArgsEnd, groupSnapshotGate)
	assert.Error(t, err)
}

// TestLock checks that a second builder waits for the first.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "build.lock")
	log := slog.New(slog.DiscardHandler)
	unlock, err := lock(context.Background(), log, path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*lockPoll)
	defer cancel()
	_, err = lock(ctx, log, path)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the lock is held")

	got := make(chan error, 1)
	go func() {
		u, err := lock(context.Background(), log, path)
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(lockPoll / 2)
	select {
	case err := <-got:
		t.Fatalf("took the lock while it was held: %v", err)
	default:
	}
	unlock()
	select {
	case err := <-got:
		assert.NoError(t, err)
	case <-time.After(5 * lockPoll):
		t.Fatal("the waiting builder did not get the lock once it was released")
	}
}

func TestFindRepoRoot(t *testing.T) {
	root := repoRoot(t)
	assert.FileExists(t, filepath.Join(root, "deploy", "Dockerfile"))
	// the nested sidecar module is not the checkout
	got, err := FindRepoRoot(filepath.Join(root, sidecarModuleDir))
	require.NoError(t, err)
	assert.Equal(t, root, got)
	_, err = FindRepoRoot(t.TempDir())
	assert.Error(t, err)
}
