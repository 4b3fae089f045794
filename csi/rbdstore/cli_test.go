package rbdstore_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
)

// importDiff writes p at off into spec with `rbd import-diff` (librbd):
// a diff stream of one write record.
func importDiff(t *testing.T, spec string, off int64, p []byte) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("rbd diff v1\n")
	b.WriteByte('w')
	binary.Write(&b, binary.LittleEndian, uint64(off))
	binary.Write(&b, binary.LittleEndian, uint64(len(p)))
	b.Write(p)
	b.WriteByte('e')
	f := filepath.Join(t.TempDir(), "diff")
	require.NoError(t, os.WriteFile(f, b.Bytes(), 0o600))
	rbdCLI(t, "import-diff", "--no-progress", f, spec)
}

// export reads spec whole with `rbd export` (librbd).
func export(t *testing.T, spec string) []byte {
	t.Helper()
	f := filepath.Join(t.TempDir(), "export")
	rbdCLI(t, "export", "--no-progress", spec, f)
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	return b
}

// TestVolumesWithRbdCLIOnCeph checks volumes made through CSI with
// Ceph's own tools: the rbd tool writes them (import-diff) and reads
// them (export) with exactly the bytes written; a volume restored from a
// CSI snapshot holds exactly the bytes of snapshot time, though the
// origin was overwritten since; a volume cloned from a volume holds the
// origin's current bytes; and after the deletes, rados ls shows no
// object of any of the images.
func TestVolumesWithRbdCLIOnCeph(t *testing.T) {
	const size = 16 << 20
	p := startPlugin(t)
	v, err := p.create(t, "cli", size, nil)
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, err)
	spec := cluster.Pool + "/" + vid.Image

	want := make([]byte, size)
	write := func(off int64, n int) {
		b := make([]byte, n)
		rand.Read(b)
		importDiff(t, spec, off, b)
		copy(want[off:], b)
	}
	write(0, 4<<10)
	write(5<<20+123, 64<<10) // mid-object, unaligned
	write(8<<20-512, 1<<10)  // across two objects
	require.True(t, bytes.Equal(want, export(t, spec)), "rbd export differs from what rbd import-diff wrote")
	atSnapshot := bytes.Clone(want)

	s, err := p.snapshot(t, "cli-snap", v.GetVolumeId())
	require.NoError(t, err)
	write(0, 8<<10)
	write(12<<20, 32<<10)
	require.True(t, bytes.Equal(want, export(t, spec)))

	restored, err := p.create(t, "cli-restored", size, fromSnapshot(s.GetSnapshotId()))
	require.NoError(t, err)
	rid, _ := csi.ParseVolumeID(restored.GetVolumeId())
	assert.True(t, bytes.Equal(atSnapshot, export(t, cluster.Pool+"/"+rid.Image)),
		"the volume restored from the snapshot does not hold the bytes of snapshot time")
	clone, err := p.create(t, "cli-clone", size, fromVolume(v.GetVolumeId()))
	require.NoError(t, err)
	cid, _ := csi.ParseVolumeID(clone.GetVolumeId())
	assert.True(t, bytes.Equal(want, export(t, cluster.Pool+"/"+cid.Image)),
		"the volume cloned from the volume does not hold its bytes")

	// The objects each image is made of, by name prefix.
	var prefixes []string
	for _, img := range []string{vid.Image, rid.Image, cid.Image} {
		id := info(t, cluster.Pool+"/"+img).ID
		require.NotEmpty(t, id)
		prefixes = append(prefixes, "rbd_id."+img, "rbd_header."+id, "rbd_data."+id, "rbd_object_map."+id)
	}
	objects := func() []string {
		var got []string
		for _, o := range strings.Fields(rbdRados(t, "-p", cluster.Pool, "ls")) {
			for _, pre := range prefixes {
				if strings.HasPrefix(o, pre) {
					got = append(got, o)
				}
			}
		}
		return got
	}
	require.NotEmpty(t, objects(), "rados ls shows none of the images' objects before the deletes")

	require.NoError(t, p.deleteVolume(t, restored.GetVolumeId()))
	require.NoError(t, p.deleteVolume(t, clone.GetVolumeId()))
	require.NoError(t, p.deleteSnapshot(t, s.GetSnapshotId()))
	require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	assert.Empty(t, images(t))
	// A data object that a removed snapshot still held a clone of goes
	// when the OSD's snapshot trimmer gets to it, after the delete has
	// returned: rados ls lists it until then.
	var left []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if left = objects(); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	assert.Empty(t, left, "objects of deleted images left in the pool a minute after the deletes")
}

// rbdRados runs Ceph's rados tool on the cluster.
func rbdRados(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cluster.Rados(testCtx(t), args...)
	require.NoError(t, err, "rados %s: %s", strings.Join(args, " "), out)
	return string(out)
}
