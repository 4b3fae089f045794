package fstools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi/internal/fsprobe"
	"github.com/purerbd/purerbd/internal/shorttier"
)

// requireProgram fails the test when a program it needs is missing.
func requireProgram(t *testing.T, name, pkg string) string {
	t.Helper()
	shorttier.Skip(t, name)
	p, err := LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: install the Debian package %s", name, pkg)
	}
	return p
}

// image returns a sparse file of size bytes.
func image(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
	return p
}

// TestTools runs mkfs.ext4 the three ways the node can: from the
// plugin's own file system, from a tools directory and chroot'ed into a
// root (here the machine's own root, as /host would be in a pod).
func TestTools(t *testing.T) {
	ctx := context.Background()
	mkfs := requireProgram(t, "mkfs.ext4", "e2fsprogs")
	real, err := filepath.EvalSymlinks(mkfs)
	require.NoError(t, err)
	toolsDir := t.TempDir()
	require.NoError(t, os.Symlink(real, filepath.Join(toolsDir, "mkfs.ext4")))

	for name, tools := range map[string]Runner{
		"path": {},
		"dir":  {Dir: toolsDir},
		"root": {Root: "/"},
	} {
		t.Run(name, func(t *testing.T) {
			img := image(t, 8<<20)
			prog, args, err := MkfsArgs("ext4", "", img)
			require.NoError(t, err)
			_, err = tools.Run(ctx, prog, args...)
			require.NoError(t, err)
			got, err := fsprobe.Device(ctx, img)
			require.NoError(t, err)
			assert.Equal(t, "ext4", got)
		})
	}

	_, err = Runner{Dir: t.TempDir()}.Run(ctx, "mkfs.ext4", "/nonexistent")
	assert.ErrorContains(t, err, "not in the tools directory")
	_, err = Runner{Root: t.TempDir()}.Run(ctx, "mkfs.ext4", "/nonexistent")
	assert.ErrorContains(t, err, "is not in")
	// A failing program's output is in the error.
	_, err = Runner{}.Run(ctx, "mkfs.ext4", "/nonexistent/device")
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "/nonexistent/device"), err.Error())
}
