package fstools

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi/internal/fsprobe"
)

// TestMkfsOptionsAllowed runs the real mke2fs and mkfs.xfs with options
// the allow-list takes, on image files: each makes the file system, so
// the list holds nothing the programs would refuse.
func TestMkfsOptionsAllowed(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		fs, options string
	}{
		{"ext4", ""},
		{"ext4", "-m0 -Enodiscard,lazy_itable_init=1,lazy_journal_init=1"},
		{"ext4", "-b 4096 -i 8192 -I 256 -N 2048 -L data -O ^has_journal,metadata_csum -T small -U clear -qF"},
		{"ext4", "-j -J size=4 -E stride=16,stripe_width=32,root_owner=1000:1000,num_backup_sb=1,packed_meta_blocks -e remount-ro -m 0.5"},
		{"ext4", "-O bigalloc -C 16384 -r 1 -v -g 8192 -Ediscard,lazy_itable_init"},
		// getopt takes the word after -L whole, as the label: "-d" here
		// is a label, not mke2fs's -d.
		{"ext4", "-L -d -q"},
		{"xfs", ""},
		{"xfs", "-K"},
		{"xfs", "-f -q -K -b size=4096 -m crc=1,finobt=1,reflink=1,rmapbt=0,bigtime=1,inobtcount=1 -i size=512,maxpct=25 -n size=8192,ftype=1"},
		{"xfs", "-l size=64m,version=2,lazy-count=1,internal -d su=64k,sw=2,agcount=4 -L data -s size=4096 -qK"},
	}
	for _, c := range cases {
		t.Run(c.fs+" "+c.options, func(t *testing.T) {
			prog, args, err := MkfsArgs(c.fs, c.options, "")
			require.NoError(t, err)
			requireProgram(t, prog, map[string]string{"ext4": "e2fsprogs", "xfs": "xfsprogs"}[c.fs])
			size := int64(32 << 20)
			if c.fs == "xfs" {
				size = 512 << 20
			}
			img := image(t, size)
			args[len(args)-1] = img
			_, err = Runner{}.Run(ctx, prog, args...)
			require.NoError(t, err)
			got, err := fsprobe.Device(ctx, img)
			require.NoError(t, err)
			assert.True(t, fsprobe.MountableAs(got, c.fs), "found %s", got)
		})
	}
}

// TestMkfsOptionsRefused checks that options which read or write host
// files, name devices, or make no file system are refused, naming the
// option.
func TestMkfsOptionsRefused(t *testing.T) {
	cases := []struct {
		fs, options, names string
	}{
		// mke2fs -d copies a host directory (the node state, with
		// tenants' keys) into the volume; -z writes a host file.
		{"ext4", "-d run/purerbd-csi", "-d"},
		{"ext4", "-m0 -d /run/purerbd-csi", "-d"},
		{"ext4", "-qd run/purerbd-csi", "-d"},
		{"ext4", "-L x -d run/purerbd-csi", "-d"},
		{"ext4", "-z etc/x", "-z"},
		{"ext4", "-l etc/badblocks", "-l"},
		{"ext4", "-J device=sda", "-J device"},
		{"ext4", "-J size=4,device=sda", "-J device"},
		{"ext4", "-E offset=4096", "-E offset"},
		{"ext4", "-E nodiscard,test_fs", "-E test_fs"},
		{"ext4", "-M mnt", "-M"},
		{"ext4", "-c", "-c"},
		{"ext4", "-n", "-n"},
		{"ext4", "-S", "-S"},
		{"ext4", "-t ext2", "-t"},
		{"ext4", "-e panic", "-e"},
		{"ext4", "-V", "-V"},
		{"ext4", "-E root_owner=0:0/x", "root_owner"},
		{"ext4", "-m0 /dev/sda", "/dev/sda"},
		{"ext4", "sda", "sda"},
		{"ext4", "-m0 -- sda", "--"},
		{"ext4", "--help", "--help"},
		{"ext4", "-L", "-L"},
		{"ext4", "-L a/b", "-L"},
		{"xfs", "-l logdev=/dev/sda", "-l logdev"},
		{"xfs", "-l size=64m,logdev=sda", "-l logdev"},
		{"xfs", "-l internal=0", "-l internal"},
		{"xfs", "-l file,name=img", "-l file"},
		{"xfs", "-d file,name=img", "-d file"},
		{"xfs", "-d name=img", "-d name"},
		{"xfs", "-p run/proto", "-p"},
		{"xfs", "-c options=etc/x", "-c"},
		{"xfs", "-r rtdev=sda", "-r"},
		{"xfs", "-N", "-N"},
		{"xfs", "-m uuid=../x", "-m uuid"},
		{"xfs", "-d size", "-d size"},
		{"xfs", "-K -j", "-j"},
	}
	for _, c := range cases {
		_, _, err := MkfsArgs(c.fs, c.options, "/dev/nbd0")
		if assert.Error(t, err, "%s %q", c.fs, c.options) {
			assert.True(t, errors.Is(err, errMkfsOption), "%v", err)
			assert.Contains(t, err.Error(), c.names, "%s %q", c.fs, c.options)
		}
	}
	assert.ErrorIs(t, CheckMkfsOptions("btrfs", "-K"), errMkfsOption)
}
