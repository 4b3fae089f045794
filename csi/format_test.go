package csi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// requireProgram fails the test when a program it needs is missing.
func requireProgram(t *testing.T, name, pkg string) string {
	t.Helper()
	shorttier.Skip(t, name)
	for _, d := range append([]string{""}, searchDirs...) {
		var p string
		var err error
		if d == "" {
			p, err = exec.LookPath(name)
		} else {
			p = filepath.Join(d, name)
			_, err = os.Stat(p)
		}
		if err == nil {
			return p
		}
	}
	t.Fatalf("%s not found: install the Debian package %s", name, pkg)
	return ""
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
			got, err := probeDevice(ctx, img)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}

	img := image(t, 4<<20)
	got, err := probeDevice(ctx, img)
	require.NoError(t, err)
	assert.Equal(t, probeBlank, got)

	// Data without a known signature, even far from the start of the
	// probed range, is not blank.
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{1}, probeSize-1)
	require.NoError(t, err)
	f.Close()
	got, err = probeDevice(ctx, img)
	require.NoError(t, err)
	assert.Equal(t, probeUnknown, got)

	// A DOS partition table.
	b := make([]byte, 4096)
	b[510], b[511] = 0x55, 0xaa
	assert.Equal(t, "dos", probeFS(b))
	// A device shorter than the probe, all zeroes.
	assert.Equal(t, probeBlank, probeFS(make([]byte, 100)))

	assert.True(t, mountableAs("ext3", "ext4"))
	assert.False(t, mountableAs("xfs", "ext4"))
	assert.False(t, mountableAs("ext4", "xfs"))
}

func TestMkfsArgs(t *testing.T) {
	prog, args, err := mkfsArgs("ext4", "", "/dev/nbd0")
	require.NoError(t, err)
	assert.Equal(t, "mkfs.ext4", prog)
	assert.Equal(t, []string{"-m0", "-Enodiscard,lazy_itable_init=1,lazy_journal_init=1", "/dev/nbd0"}, args)
	prog, args, err = mkfsArgs("xfs", "", "/dev/nbd0")
	require.NoError(t, err)
	assert.Equal(t, "mkfs.xfs", prog)
	assert.Equal(t, []string{"-K", "/dev/nbd0"}, args)
	_, args, err = mkfsArgs("ext4", "  -m1 -O ^has_journal ", "/dev/nbd0")
	require.NoError(t, err)
	assert.Equal(t, []string{"-m1", "-O", "^has_journal", "/dev/nbd0"}, args)
	_, _, err = mkfsArgs("ext4", "-m0 /dev/sda", "/dev/nbd0")
	assert.Error(t, err)
	_, _, err = mkfsArgs("btrfs", "", "/dev/nbd0")
	assert.Error(t, err)
	// The defaults are not shared with callers.
	_, args, _ = mkfsArgs("xfs", "", "/dev/a")
	args[0] = "changed"
	_, args, _ = mkfsArgs("xfs", "", "/dev/b")
	assert.Equal(t, "-K", args[0])

	prog, args, err = growArgs("ext3", "/dev/nbd0", "/m")
	require.NoError(t, err)
	assert.Equal(t, "resize2fs", prog)
	assert.Equal(t, []string{"/dev/nbd0"}, args)
	prog, args, err = growArgs("xfs", "/dev/nbd0", "/m")
	require.NoError(t, err)
	assert.Equal(t, "xfs_growfs", prog)
	assert.Equal(t, []string{"-d", "/m"}, args)
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

	for name, tools := range map[string]Tools{
		"path": {},
		"dir":  {Dir: toolsDir},
		"root": {Root: "/"},
	} {
		t.Run(name, func(t *testing.T) {
			img := image(t, 8<<20)
			prog, args, err := mkfsArgs("ext4", "", img)
			require.NoError(t, err)
			_, err = tools.run(ctx, prog, args...)
			require.NoError(t, err)
			got, err := probeDevice(ctx, img)
			require.NoError(t, err)
			assert.Equal(t, "ext4", got)
		})
	}

	_, err = Tools{Dir: t.TempDir()}.run(ctx, "mkfs.ext4", "/nonexistent")
	assert.ErrorContains(t, err, "not in the tools directory")
	_, err = Tools{Root: t.TempDir()}.run(ctx, "mkfs.ext4", "/nonexistent")
	assert.ErrorContains(t, err, "is not in")
	// A failing program's output is in the error.
	_, err = Tools{}.run(ctx, "mkfs.ext4", "/nonexistent/device")
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "/nonexistent/device"), err.Error())
}
