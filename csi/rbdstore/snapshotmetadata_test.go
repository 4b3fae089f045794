package rbdstore_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
)

// rbdDiffRanges lists spec's extents as Ceph's `rbd diff --format json`
// does (args: --from-snap and the like), as offset/length pairs from
// start.
func rbdDiffRanges(t *testing.T, start int64, args ...string) [][2]int64 {
	t.Helper()
	var ext []struct {
		Offset int64 `json:"offset"`
		Length int64 `json:"length"`
	}
	require.NoError(t, json.Unmarshal([]byte(rbdCLI(t, append([]string{"diff", "--format", "json"}, args...)...)), &ext))
	var out [][2]int64
	for _, e := range ext {
		if e.Offset+e.Length <= start {
			continue
		}
		if e.Offset < start {
			e.Length -= start - e.Offset
			e.Offset = start
		}
		out = append(out, [2]int64{e.Offset, e.Length})
	}
	return out
}

// streamRanges reads a SnapshotMetadata stream: its ranges and how many
// messages carried them.
func streamRanges[M interface{ GetBlockMetadata() []*csipb.BlockMetadata }](t *testing.T, recv func() (M, error)) ([][2]int64, int) {
	t.Helper()
	var out [][2]int64
	msgs := 0
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return out, msgs
		}
		require.NoError(t, err)
		msgs++
		for _, b := range m.GetBlockMetadata() {
			out = append(out, [2]int64{b.GetByteOffset(), b.GetSizeBytes()})
		}
	}
}

// importDiffZero discards [off, off+n) of spec with `rbd import-diff` (a
// zero record).
func importDiffZero(t *testing.T, spec string, off, n int64) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("rbd diff v1\n")
	b.WriteByte('z')
	binary.Write(&b, binary.LittleEndian, uint64(off))
	binary.Write(&b, binary.LittleEndian, uint64(n))
	b.WriteByte('e')
	f := filepath.Join(t.TempDir(), "diff")
	require.NoError(t, os.WriteFile(f, b.Bytes(), 0o600))
	rbdCLI(t, "import-diff", "--no-progress", f, spec)
}

// TestSnapshotMetadataOnCeph checks changed-block tracking against Ceph's
// own rbd diff: a volume written by librbd (import-diff), snapshotted
// through CSI, written and discarded again, snapshotted again; the
// allocated ranges of each snapshot equal `rbd diff IMAGE@SNAP`, the
// delta equals `rbd diff --from-snap`, one range per message with
// max_results 1, and a starting offset inside a range cuts it there.
func TestSnapshotMetadataOnCeph(t *testing.T) {
	const size = 32 << 20
	p := startPlugin(t)
	v, err := p.create(t, "cbt", size, nil)
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, err)
	spec := cluster.Pool + "/" + vid.Image
	write := func(off int64, n int) {
		b := make([]byte, n)
		rand.Read(b)
		importDiff(t, spec, off, b)
	}
	write(0, 4<<10)
	write(5<<20+123, 64<<10)
	write(8<<20-512, 1<<10)
	write(20<<20, 4<<20)
	s1, err := p.snapshot(t, "cbt-1", v.GetVolumeId())
	require.NoError(t, err)
	write(5<<20, 8<<10)
	write(12<<20, 32<<10)
	importDiffZero(t, spec, 20<<20, 4<<20) // a whole object
	importDiffZero(t, spec, 8<<20-512, 256)
	s2, err := p.snapshot(t, "cbt-2", v.GetVolumeId())
	require.NoError(t, err)
	write(30<<20, 4096) // after both snapshots: in neither

	sid1, err := csi.ParseSnapshotID(s1.GetSnapshotId())
	require.NoError(t, err)
	sid2, err := csi.ParseSnapshotID(s2.GetSnapshotId())
	require.NoError(t, err)
	ctx := testCtx(t)
	for _, c := range []struct {
		snap  *csipb.Snapshot
		name  string
		start int64
	}{{s1, sid1.Snap, 0}, {s2, sid2.Snap, 0}, {s2, sid2.Snap, 5<<20 + 1000}} {
		st, err := p.meta.GetMetadataAllocated(ctx, &csipb.GetMetadataAllocatedRequest{SnapshotId: c.snap.GetSnapshotId(), StartingOffset: c.start})
		require.NoError(t, err)
		got, _ := streamRanges(t, st.Recv)
		want := rbdDiffRanges(t, c.start, spec+"@"+c.name)
		assert.Equal(t, want, got, "allocated ranges of %s from %d", c.name, c.start)
		t.Logf("allocated %s from %d: %d ranges", c.name, c.start, len(got))
	}
	dt, err := p.meta.GetMetadataDelta(ctx, &csipb.GetMetadataDeltaRequest{BaseSnapshotId: s1.GetSnapshotId(), TargetSnapshotId: s2.GetSnapshotId(), MaxResults: 1})
	require.NoError(t, err)
	got, msgs := streamRanges(t, dt.Recv)
	want := rbdDiffRanges(t, 0, "--from-snap", sid1.Snap, spec+"@"+sid2.Snap)
	assert.Equal(t, want, got, "changed ranges")
	assert.Equal(t, len(got), msgs, "max_results 1: one range per message")
	assert.GreaterOrEqual(t, len(got), 4, "the delta lists the writes and the discards")
	t.Logf("delta: %v", got)
}
