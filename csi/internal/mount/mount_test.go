package mount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestParseMountInfo(t *testing.T) {
	in := `22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
29 1 43:32 / /var/lib/kubelet/plugins/x/globalmount rw,relatime shared:1 master:2 - ext4 /dev/nbd1 rw,stripe=16
30 1 43:32 / /var/lib/kubelet/pods/p/volumes/my\040vol ro,relatime - ext4 /dev/nbd1 rw
31 1 0:5 /nbd1 /pods/blk/dev rw,nosuid - devtmpfs udev rw,size=1k
`
	l, err := parseMountInfo(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, l, 4)
	assert.Equal(t, Info{ID: 29, Parent: 1, Major: 43, Minor: 32, Root: "/", MountPoint: "/var/lib/kubelet/plugins/x/globalmount",
		Options: "rw,relatime", FsType: "ext4", Source: "/dev/nbd1", SuperOptions: "rw,stripe=16"}, l[1])
	assert.Equal(t, "/var/lib/kubelet/pods/p/volumes/my vol", l[2].MountPoint)
	assert.True(t, l[2].ReadOnly())
	assert.False(t, l[1].ReadOnly())
	assert.Equal(t, "/nbd1", l[3].Root)

	tab := Table(l)
	m, ok := tab.At("/pods/blk/dev")
	assert.True(t, ok)
	assert.Equal(t, "devtmpfs", m.FsType)
	assert.Len(t, tab.ofDevice(43, 32), 2)

	for _, bad := range []string{"1 2 3\n", "x 1 0:1 / /a rw - t s o\n", "1 1 0-1 / /a rw - t s o\n", "1 1 0:1 / /a rw t s o\n"} {
		_, err := parseMountInfo(strings.NewReader(bad))
		assert.Error(t, err, "%q", bad)
	}
	assert.Equal(t, `a\b`, unescapeMount(`a\b`))
	assert.Equal(t, "a\tb\\", unescapeMount(`a\011b\134`))
}

func TestParseMountFlags(t *testing.T) {
	o, err := ParseFlags([]string{"noatime", "ro,nodev", "discard", "errors=remount-ro", "rw", " ", "defaults"})
	require.NoError(t, err)
	assert.Equal(t, uintptr(unix.MS_NOATIME|unix.MS_NODEV), o.Flags)
	assert.Equal(t, "discard,errors=remount-ro", o.dataString())

	for _, bad := range []string{"bind", "remount", "rshared", "a\nb"} {
		_, err := ParseFlags([]string{"noatime", bad})
		require.Error(t, err, bad)
		if bad == "a\nb" {
			assert.NotContains(t, err.Error(), bad, "flags may be secret: never quoted")
		}
	}
}

// TestBindMountReadOnly bind-mounts a tmpfs read-only, the way
// NodePublish does, and unmounts it again. It needs CAP_SYS_ADMIN.
func TestBindMountReadOnly(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	require.NoError(t, os.Mkdir(src, 0o755))
	require.NoError(t, os.Mkdir(dst, 0o755))
	require.NoError(t, unix.Mount("tmpfs", src, "tmpfs", 0, "size=1m"), "mounting a tmpfs needs CAP_SYS_ADMIN")
	t.Cleanup(func() { UnmountAll(dst); UnmountAll(src) })
	require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644))

	require.NoError(t, Bind(src, dst, Options{Flags: unix.MS_RDONLY | unix.MS_NOEXEC}))
	tab, err := ReadTable()
	require.NoError(t, err)
	m, ok := tab.At(dst)
	require.True(t, ok)
	assert.True(t, m.ReadOnly())
	assert.True(t, hasOption(m.Options, "noexec"))
	assert.Equal(t, "tmpfs", m.FsType)
	b, err := os.ReadFile(filepath.Join(dst, "f"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
	assert.Error(t, os.WriteFile(filepath.Join(dst, "g"), nil, 0o644), "read-only bind mount")
	srcMount, _ := tab.At(src)
	assert.False(t, srcMount.ReadOnly(), "the source stays writable")

	// Stacked mounts all go.
	require.NoError(t, Bind(src, dst, Options{}))
	require.NoError(t, UnmountAll(dst))
	tab, _ = ReadTable()
	_, ok = tab.At(dst)
	assert.False(t, ok)
	require.NoError(t, UnmountAll(dst), "nothing mounted: no error")
	require.NoError(t, UnmountAll(src))
}

// TestMountThroughSymlink mounts a tmpfs at a directory reached through
// a symbolic link: the link is seen as mounted, and unmounting it
// unmounts the directory (it used to report success and leave the
// mount). It needs CAP_SYS_ADMIN.
func TestMountThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real"), filepath.Join(dir, "link")
	require.NoError(t, os.Mkdir(real, 0o755))
	require.NoError(t, os.Symlink("real", link))
	require.NoError(t, unix.Mount("tmpfs", link, "tmpfs", 0, "size=1m"), "mounting a tmpfs needs CAP_SYS_ADMIN")
	t.Cleanup(func() { unix.Unmount(real, 0) })

	tab, err := ReadTable()
	require.NoError(t, err)
	_, ok := tab.At(link)
	assert.True(t, ok, "mounted, seen through the link")
	_, ok = tab.At(real)
	assert.True(t, ok)

	require.NoError(t, UnmountAll(link))
	tab, err = ReadTable()
	require.NoError(t, err)
	_, ok = tab.At(real)
	assert.False(t, ok, "unmounting the link unmounts its target")

	// unmount alone too.
	require.NoError(t, unix.Mount("tmpfs", real, "tmpfs", 0, "size=1m"))
	require.NoError(t, Unmount(link))
	tab, _ = ReadTable()
	_, ok = tab.At(real)
	assert.False(t, ok)
}
