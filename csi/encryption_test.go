package csi_test

import (
	"context"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/purerbd/purerbd/csi/fakestore"
)

func (h *harness) image(name string) fakestore.ImageState {
	h.t.Helper()
	for _, im := range h.store.Images(testCluster) {
		if im.Name == name {
			return im
		}
	}
	h.t.Fatalf("no image %s", name)
	return fakestore.ImageState{}
}

// TestEncryptedVolumeLifecycle: an encrypted class marks its images for
// formatting at the first stage (the header's room comes out of the
// capacity, as with ceph-csi before 3.15); a restore of their snapshot,
// by any class, is encrypted too; an encrypted class cannot restore a
// plain volume's snapshot, nor make a volume no larger than the header.
func TestEncryptedVolumeLifecycle(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	req := h.volReq("enc-1", 64<<20)
	req.Parameters["encrypted"] = "true"
	r, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	v := r.GetVolume()
	assert.Equal(t, int64(64<<20), v.GetCapacityBytes())
	im := h.image(v.GetVolumeContext()["imageName"])
	assert.Equal(t, uint64(64<<20), im.Size)
	assert.Equal(t, "encryptionPrepared", im.Meta["rbd.csi.ceph.com/encrypted"])
	r2, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, v.GetVolumeId(), r2.GetVolume().GetVolumeId())

	sn := h.createSnapshot("enc-snap", v.GetVolumeId())
	rr := h.volReq("enc-restore", 0)
	rr.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: sn.GetSnapshotId()}}}
	rv, err := h.ctrl.CreateVolume(ctx, rr)
	require.NoError(t, err)
	rim := h.image(rv.GetVolume().GetVolumeContext()["imageName"])
	assert.Equal(t, "encryptionPrepared", rim.Meta["rbd.csi.ceph.com/encrypted"])

	plain := h.createVolume("plain-1", 8<<20)
	assert.NotContains(t, h.image(plain.GetVolumeContext()["imageName"]).Meta, "rbd.csi.ceph.com/encrypted")
	psn := h.createSnapshot("plain-snap", plain.GetVolumeId())
	pr := h.volReq("enc-from-plain", 0)
	pr.Parameters["encrypted"] = "true"
	pr.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: psn.GetSnapshotId()}}}
	_, err = h.ctrl.CreateVolume(ctx, pr)
	assert.Equal(t, codes.InvalidArgument, code(err), "%v", err)

	small := h.volReq("enc-small", 16<<20)
	small.Parameters["encrypted"] = "true"
	_, err = h.ctrl.CreateVolume(ctx, small)
	assert.Equal(t, codes.OutOfRange, code(err), "%v", err)
}

func TestEncryptionParameters(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, tc := range []struct {
		params map[string]string
		code   codes.Code
	}{
		{map[string]string{"encrypted": "false"}, codes.OK},
		{map[string]string{"encrypted": "true", "encryptionType": "block"}, codes.OK},
		{map[string]string{"encrypted": "false", "encryptionType": "file", "encryptionKMSID": "vault"}, codes.OK},
		{map[string]string{"encrypted": "true", "encryptionType": "file"}, codes.InvalidArgument},
		{map[string]string{"encrypted": "true", "encryptionKMSID": "vault-1"}, codes.InvalidArgument},
		{map[string]string{"encrypted": "yes please"}, codes.InvalidArgument},
	} {
		req := h.volReq("p", 32<<20)
		for k, v := range tc.params {
			req.Parameters[k] = v
		}
		_, err := h.ctrl.CreateVolume(context.Background(), req)
		assert.Equal(t, tc.code, code(err), "%v: %v", tc.params, err)
		if err == nil {
			require.NoError(t, h.deleteVolume(mustVolumeID(t, h, req)))
		}
	}
}

func mustVolumeID(t *testing.T, h *harness, req *csipb.CreateVolumeRequest) string {
	t.Helper()
	r, err := h.ctrl.CreateVolume(context.Background(), req)
	require.NoError(t, err)
	return r.GetVolume().GetVolumeId()
}
