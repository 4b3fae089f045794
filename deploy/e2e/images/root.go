package images

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// modulePath is the module a checkout's go.mod declares.
const modulePath = "github.com/purerbd/purerbd"

// FindRepoRoot returns the purerbd checkout holding dir: the nearest
// directory at or above it whose go.mod declares the main module (the
// nested modules under deploy/e2e declare others).
func FindRepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+modulePath+"\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no purerbd checkout (go.mod of %s) at or above %s", modulePath, dir)
		}
	}
}
