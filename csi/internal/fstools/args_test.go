package fstools

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMkfsArgs(t *testing.T) {
	prog, args, err := MkfsArgs("ext4", "", "/dev/nbd0")
	require.NoError(t, err)
	assert.Equal(t, "mkfs.ext4", prog)
	assert.Equal(t, []string{"-m0", "-Enodiscard,lazy_itable_init=1,lazy_journal_init=1", "/dev/nbd0"}, args)
	prog, args, err = MkfsArgs("xfs", "", "/dev/nbd0")
	require.NoError(t, err)
	assert.Equal(t, "mkfs.xfs", prog)
	assert.Equal(t, []string{"-K", "/dev/nbd0"}, args)
	_, args, err = MkfsArgs("ext4", "  -m1 -O ^has_journal ", "/dev/nbd0")
	require.NoError(t, err)
	assert.Equal(t, []string{"-m1", "-O", "^has_journal", "/dev/nbd0"}, args)
	_, _, err = MkfsArgs("ext4", "-m0 /dev/sda", "/dev/nbd0")
	assert.Error(t, err)
	_, _, err = MkfsArgs("btrfs", "", "/dev/nbd0")
	assert.Error(t, err)
	// The defaults are not shared with callers.
	_, args, _ = MkfsArgs("xfs", "", "/dev/a")
	args[0] = "changed"
	_, args, _ = MkfsArgs("xfs", "", "/dev/b")
	assert.Equal(t, "-K", args[0])

	prog, args, err = GrowArgs("ext3", "/dev/nbd0", "/m")
	require.NoError(t, err)
	assert.Equal(t, "resize2fs", prog)
	assert.Equal(t, []string{"/dev/nbd0"}, args)
	prog, args, err = GrowArgs("xfs", "/dev/nbd0", "/m")
	require.NoError(t, err)
	assert.Equal(t, "xfs_growfs", prog)
	assert.Equal(t, []string{"-d", "/m"}, args)
}
