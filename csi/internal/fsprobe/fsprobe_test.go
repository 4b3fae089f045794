package fsprobe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi/internal/fstools"
	"github.com/purerbd/purerbd/internal/shorttier"
)

// requireProgram fails the test when a program it needs is missing.
func requireProgram(t *testing.T, name, pkg string) string {
	t.Helper()
	shorttier.Skip(t, name)
	p, err := fstools.LookPath(name)
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

// TestProbeFS checks the superblock probing against file systems made by
// the real tools.
func TestProbeFS(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		want string
		prog string
		pkg  string
		args []string
		size int64
	}{
		{"ext4", "mkfs.ext4", "e2fsprogs", []string{"-q", "-F"}, 16 << 20},
		{"ext3", "mkfs.ext3", "e2fsprogs", []string{"-q", "-F"}, 16 << 20},
		{"ext2", "mkfs.ext2", "e2fsprogs", []string{"-q", "-F"}, 16 << 20},
		{"xfs", "mkfs.xfs", "xfsprogs", []string{"-q", "-f"}, 320 << 20},
		{"swap", "mkswap", "util-linux", nil, 1 << 20},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			prog := requireProgram(t, c.prog, c.pkg)
			img := image(t, c.size)
			out, err := exec.Command(prog, append(c.args, img)...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			got, err := Device(ctx, img)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}

	img := image(t, 4<<20)
	got, err := Device(ctx, img)
	require.NoError(t, err)
	assert.Equal(t, Blank, got)

	// Data without a known signature, even far from the start of the
	// probed range, is not blank.
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{1}, probeSize-1)
	require.NoError(t, err)
	f.Close()
	got, err = Device(ctx, img)
	require.NoError(t, err)
	assert.Equal(t, Unknown, got)

	// A DOS partition table.
	b := make([]byte, 4096)
	b[510], b[511] = 0x55, 0xaa
	assert.Equal(t, "dos", probeFS(b))
	// A device shorter than the probe, all zeroes.
	assert.Equal(t, Blank, probeFS(make([]byte, 100)))

	assert.True(t, MountableAs("ext3", "ext4"))
	assert.False(t, MountableAs("xfs", "ext4"))
	assert.False(t, MountableAs("ext4", "xfs"))
}
