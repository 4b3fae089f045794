package main

import (
	"path/filepath"
	"strings"
)

// multiCallArgs turns the command line of a purerbd binary reached under
// another name (a symlink named rbd, rados or rbd-nbd, as in an image
// where scripts call Ceph's tools) into purerbd's: `rbd ls` runs
// `purerbd rbd ls`, `rados lspools` runs `purerbd rados lspools`, and
// rbd-nbd's verbs map, unmap and list-mapped run `purerbd nbd map`,
// `nbd unmap` and `nbd list`. Any other name leaves args alone.
func multiCallArgs(argv0 string, args []string) []string {
	name := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	switch name {
	case "rbd", "rados":
		return append([]string{name}, args...)
	case "rbd-nbd":
		out := []string{"nbd"}
		for i, a := range args {
			if strings.HasPrefix(a, "-") {
				continue
			}
			verb := map[string]string{"map": "map", "unmap": "unmap", "list-mapped": "list"}[a]
			if verb == "" {
				break // not an rbd-nbd verb purerbd has: let the nbd group say so
			}
			out = append(out, args[:i]...)
			out = append(out, verb)
			return append(out, args[i+1:]...)
		}
		return append(out, args...)
	}
	return args
}
