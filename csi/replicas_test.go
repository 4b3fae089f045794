package csi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestReplicasKeepOperationsApart: two replicas of the controller on one
// cluster, as when the sidecars' leaders sit in different pods. While
// one snapshots a volume, the other's DeleteVolume of it is ABORTED (the
// replicas' operation lock), as is the first's own (its in-process
// lock); once the snapshot is done the deletion goes through.
func TestReplicasKeepOperationsApart(t *testing.T) {
	a := newHarness(t, harnessOpts{})
	b := newHarness(t, harnessOpts{replicaOf: a})
	v := a.createVolume("src", 4<<20)

	held := a.faults.blockAt("create-snapshot/snapshot")
	done := make(chan error, 1)
	go func() {
		_, err := a.trySnapshot("snap", v.GetVolumeId())
		done <- err
	}()
	release := <-held

	err := b.deleteVolume(v.GetVolumeId())
	require.Equal(t, codes.Aborted, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "another controller replica")
	_, err = b.trySnapshot("snap", v.GetVolumeId())
	require.Equal(t, codes.Aborted, status.Code(err), "%v", err)
	err = a.deleteVolume(v.GetVolumeId())
	require.Equal(t, codes.Aborted, status.Code(err), "%v", err)
	assert.Len(t, a.imageNames(), 1, "the volume is still there")

	close(release)
	require.NoError(t, <-done)
	// released with the operation: the other replica goes on
	require.NoError(t, b.deleteVolume(v.GetVolumeId()))
	id, err := b.trySnapshot("snap2", v.GetVolumeId())
	assert.Equal(t, codes.NotFound, status.Code(err), "snapshot of a deleted volume: %q %v", id, err)
}
