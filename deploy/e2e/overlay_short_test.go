package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// TestWriteOverlay builds an overlay of the shipped manifests with the
// snapshot-metadata component with the Kubernetes build's kubectl, when
// the cache holds it: kustomize refuses absolute paths.
func TestWriteOverlay(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	k := filepath.Join(root, "deploy", "kubernetes")
	if err := WriteOverlay(filepath.Join(dir, "o"), k, filepath.Join(k, "snapshot-metadata")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "o", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"/`) {
		t.Fatalf("the overlay names absolute paths:\n%s", b)
	}
	shorttier.Skip(t, "the Kubernetes build (kubectl)")
	bin, err := KubeBinary(t.Context(), root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), bin, "kubectl", "kustomize", filepath.Join(dir, "o")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	for _, want := range []string{"name: csi-snapshot-metadata", "name: purerbd-csi-snapshot-metadata", "name: cbt-metrics", "name: purerbd-csi-controller"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the overlay's output has no %q", want)
		}
	}
}
