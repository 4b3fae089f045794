package csi_test

import (
	"context"
	"errors"
	"io"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// metadataResponse is what both calls' responses carry.
type metadataResponse interface {
	GetBlockMetadataType() csipb.BlockMetadataType
	GetVolumeCapacityBytes() int64
	GetBlockMetadata() []*csipb.BlockMetadata
}

// drain reads a stream to its end: every message's ranges, the sizes
// they claim, and the stream's error.
func drain[M metadataResponse](recv func() (M, error)) (ranges [][2]int64, sizes []int64, msgs int, err error) {
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return ranges, sizes, msgs, nil
		}
		if err != nil {
			return ranges, sizes, msgs, err
		}
		msgs++
		if m.GetBlockMetadataType() != csipb.BlockMetadataType_VARIABLE_LENGTH {
			return ranges, sizes, msgs, errors.New("not VARIABLE_LENGTH")
		}
		sizes = append(sizes, m.GetVolumeCapacityBytes())
		for _, b := range m.GetBlockMetadata() {
			ranges = append(ranges, [2]int64{b.GetByteOffset(), b.GetSizeBytes()})
		}
	}
}

// TestSnapshotMetadataService checks the service's plumbing on the fake
// store (which reports a whole snapshot as one range): the capability,
// the starting offset, the codes of bad requests. Its ranges against
// Ceph's rbd diff: rbdstore's TestSnapshotMetadataOnCeph.
func TestSnapshotMetadataService(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	caps, err := h.ident.GetPluginCapabilities(ctx, &csipb.GetPluginCapabilitiesRequest{})
	require.NoError(t, err)
	found := false
	for _, c := range caps.GetCapabilities() {
		found = found || c.GetService().GetType() == csipb.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE
	}
	assert.True(t, found, "SNAPSHOT_METADATA_SERVICE not advertised")

	v := h.createVolume("cbt", 8<<20)
	s1 := h.createSnapshot("cbt-1", v.GetVolumeId())
	s2 := h.createSnapshot("cbt-2", v.GetVolumeId())
	other := h.createSnapshot("cbt-other", h.createVolume("cbt-other", 8<<20).GetVolumeId())

	st, err := h.meta.GetMetadataAllocated(ctx, &csipb.GetMetadataAllocatedRequest{SnapshotId: s1.GetSnapshotId(), StartingOffset: 4096})
	require.NoError(t, err)
	ranges, sizes, _, err := drain(st.Recv)
	require.NoError(t, err)
	assert.Equal(t, [][2]int64{{4096, 8<<20 - 4096}}, ranges)
	assert.Equal(t, []int64{8 << 20}, sizes)

	dt, err := h.meta.GetMetadataDelta(ctx, &csipb.GetMetadataDeltaRequest{BaseSnapshotId: s1.GetSnapshotId(), TargetSnapshotId: s2.GetSnapshotId()})
	require.NoError(t, err)
	ranges, _, _, err = drain(dt.Recv)
	require.NoError(t, err)
	assert.Equal(t, [][2]int64{{0, 8 << 20}}, ranges)

	for name, c := range map[string]struct {
		req  *csipb.GetMetadataDeltaRequest
		want codes.Code
	}{
		"no base":        {&csipb.GetMetadataDeltaRequest{TargetSnapshotId: s2.GetSnapshotId()}, codes.InvalidArgument},
		"reversed":       {&csipb.GetMetadataDeltaRequest{BaseSnapshotId: s2.GetSnapshotId(), TargetSnapshotId: s1.GetSnapshotId()}, codes.InvalidArgument},
		"same":           {&csipb.GetMetadataDeltaRequest{BaseSnapshotId: s1.GetSnapshotId(), TargetSnapshotId: s1.GetSnapshotId()}, codes.InvalidArgument},
		"other volume":   {&csipb.GetMetadataDeltaRequest{BaseSnapshotId: s1.GetSnapshotId(), TargetSnapshotId: other.GetSnapshotId()}, codes.InvalidArgument},
		"unknown":        {&csipb.GetMetadataDeltaRequest{BaseSnapshotId: "nope", TargetSnapshotId: s2.GetSnapshotId()}, codes.NotFound},
		"negative start": {&csipb.GetMetadataDeltaRequest{BaseSnapshotId: s1.GetSnapshotId(), TargetSnapshotId: s2.GetSnapshotId(), StartingOffset: -1}, codes.InvalidArgument},
		"past the end":   {&csipb.GetMetadataDeltaRequest{BaseSnapshotId: s1.GetSnapshotId(), TargetSnapshotId: s2.GetSnapshotId(), StartingOffset: 8 << 20}, codes.OutOfRange},
		"negative max":   {&csipb.GetMetadataDeltaRequest{BaseSnapshotId: s1.GetSnapshotId(), TargetSnapshotId: s2.GetSnapshotId(), MaxResults: -1}, codes.InvalidArgument},
	} {
		st, err := h.meta.GetMetadataDelta(ctx, c.req)
		if err == nil {
			_, _, _, err = drain(st.Recv)
		}
		assert.Equal(t, c.want, code(err), "%s: %v", name, err)
	}
	require.NoError(t, h.deleteSnapshot(s2.GetSnapshotId()))
	at, err := h.meta.GetMetadataAllocated(ctx, &csipb.GetMetadataAllocatedRequest{SnapshotId: s2.GetSnapshotId()})
	if err == nil {
		_, _, _, err = drain(at.Recv)
	}
	assert.Equal(t, codes.NotFound, code(err), "a deleted snapshot: %v", err)
}
