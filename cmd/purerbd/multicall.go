package main

import (
	"path/filepath"
	"strings"
)

// multiCallArgs turns the command line of a purerbd binary reached under
// another name (a symlink named rbd, rados or rbd-nbd, as in an image
// where scripts call Ceph's tools) into purerbd's: `rbd ls` runs
// `purerbd rbd ls`, `rados lspools` runs `purerbd rados lspools`,
// `rbd-nbd map IMAGE` runs `purerbd rbd-nbd map IMAGE`. Any other name
// leaves args alone.
func multiCallArgs(argv0 string, args []string) []string {
	switch name := strings.TrimSuffix(filepath.Base(argv0), ".exe"); name {
	case "rbd", "rados", "rbd-nbd":
		return append([]string{name}, args...)
	}
	return args
}
