package blockdev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// TestNumber refuses nodes that are not block devices, and reads the
// numbers of a block device node made for the test (mknod needs root).
func TestNumber(t *testing.T) {
	dir := t.TempDir()
	_, _, err := Number("/dev/null")
	assert.ErrorContains(t, err, "not a block device")
	reg := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(reg, nil, 0o600))
	_, _, err = Number(reg)
	assert.ErrorContains(t, err, "not a block device")
	_, _, err = Number(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	shorttier.Skip(t, "root (mknod)")
	blk := filepath.Join(dir, "blk")
	require.NoError(t, unix.Mknod(blk, unix.S_IFBLK|0o600, int(unix.Mkdev(43, 300))), "mknod needs CAP_MKNOD")
	maj, min, err := Number(blk)
	require.NoError(t, err)
	assert.Equal(t, []uint32{43, 300}, []uint32{maj, min})
}
