package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteOverlay writes dir/kustomization.yaml: an overlay of base with
// components, as an operator's own kustomization names them. kustomize
// takes only relative paths there, so they are made relative to dir.
func WriteOverlay(dir, base string, components ...string) error {
	rel := func(p string) (string, error) {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			return "", fmt.Errorf("overlay: %w", err)
		}
		return fmt.Sprintf("%q", r), nil
	}
	b, err := rel(base)
	if err != nil {
		return err
	}
	var comps []string
	for _, c := range components {
		r, err := rel(c)
		if err != nil {
			return err
		}
		comps = append(comps, r)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n", b, strings.Join(comps, ", "))
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}
