package images

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// pluginImage is the repository of the purerbd-csi image.
const pluginImage = "purerbd/purerbd-csi"

// imageLine matches a container's image in a manifest.
var imageLine = regexp.MustCompile(`(?m)^[ \t]*(?:-[ \t]+)?image:[ \t]*["']?([^"'\s#]+)`)

// manifestImages are the image references deploy/kubernetes names.
type manifestImages struct {
	plugin string            // purerbd/purerbd-csi:TAG
	others map[string]string // image name (last path element) -> reference
}

// manifestComponents are the kustomize components under
// deploy/kubernetes whose images the e2e run needs too.
func manifestComponents() []string { return []string{"snapshot-metadata"} }

// manifestRefs reads the image references out of deploy/kubernetes/*.yaml
// (the manifests the e2e run applies unchanged) and its components: one
// purerbd-csi reference, and the sidecars'.
func manifestRefs(root string) (manifestImages, error) {
	m := manifestImages{others: map[string]string{}}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		return m, fmt.Errorf("images: no manifests in %s/deploy/kubernetes: %v", root, err)
	}
	for _, comp := range manifestComponents() {
		more, err := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", comp, "*.yaml"))
		if err != nil || len(more) == 0 {
			return m, fmt.Errorf("images: no manifests in %s/deploy/kubernetes/%s: %v", root, comp, err)
		}
		files = append(files, more...)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return m, fmt.Errorf("images: %w", err)
		}
		for _, sub := range imageLine.FindAllSubmatch(b, -1) {
			ref := string(sub[1])
			repo, _, ok := strings.Cut(ref, ":")
			if !ok {
				return m, fmt.Errorf("images: %s: image %s has no tag", filepath.Base(f), ref)
			}
			if repo == pluginImage {
				if m.plugin != "" && m.plugin != ref {
					return m, fmt.Errorf("images: the manifests name both %s and %s", m.plugin, ref)
				}
				m.plugin = ref
				continue
			}
			name := path.Base(repo)
			if prev, ok := m.others[name]; ok && prev != ref {
				return m, fmt.Errorf("images: the manifests name both %s and %s", prev, ref)
			}
			m.others[name] = ref
		}
	}
	if m.plugin == "" {
		return m, fmt.Errorf("images: no %s image in %s/deploy/kubernetes", pluginImage, root)
	}
	return m, nil
}
