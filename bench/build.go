package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Binary is a static binary the suite built.
type Binary struct {
	Name string
	Path string
	Size int64
}

// ldflags are those of `make build` minus the version stamp.
const ldflags = "-s -w"

// buildBinaries builds ./cmd/... and ./bench/cmd/... from the module at
// root into dir, as `make build` does (CGO_ENABLED=0, -trimpath, -s -w).
func buildBinaries(ctx context.Context, root, dir string) (map[string]Binary, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", dir+"/",
		"./cmd/...", "./bench/cmd/...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w: %s", err, strings.TrimSpace(string(out)))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	bins := map[string]Binary{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		bins[e.Name()] = Binary{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Size: fi.Size()}
	}
	if _, ok := bins["purerbd"]; !ok {
		return nil, fmt.Errorf("go build: no purerbd binary in %s", dir)
	}
	return bins, nil
}

// sortedBinaries lists bins by name.
func sortedBinaries(bins map[string]Binary) []Binary {
	var l []Binary
	for _, b := range bins {
		l = append(l, b)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	return l
}
