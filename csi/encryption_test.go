package csi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/purerbd/purerbd/csi"
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
		{map[string]string{"encrypted": "true", "encryptionKMSID": "vault-1"}, codes.FailedPrecondition}, // no KMS configuration
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

// TestEncryptedVolumesUnderKMS: a class naming a KMS section of type
// "metadata" gives each volume a sealed key of its own (with the KMS and
// the claim's namespace recorded for the node), read from the request's
// secret or from the Kubernetes Secret the section names; restores get
// the key sealed again; what cannot be resolved is refused with the code
// saying whose fault it is.
func TestEncryptedVolumesUnderKMS(t *testing.T) {
	read := map[string]int{}
	h := newHarness(t, harnessOpts{
		kmsConfig: `{"meta-sc": {"encryptionKMSType": "metadata"},
		  "meta-secret": {"encryptionKMSType": "metadata", "secretName": "kms-pass"},
		  "meta-fixed": {"KMS_PROVIDER": "metadata", "secretName": "kms-pass", "secretNamespace": "vault-ns"},
		  "vault": {"encryptionKMSType": "vault", "vaultAddress": "https://vault:8200"}}`,
		kmsSecrets: func(_ context.Context, ns, name string) (map[string]string, error) {
			read[ns+"/"+name]++
			if name != "kms-pass" {
				return nil, fmt.Errorf("secrets %q not found", name)
			}
			return map[string]string{"encryptionPassphrase": "from the secret " + ns}, nil
		},
	})
	ctx := context.Background()
	create := func(name, kms string, withPass bool) (*csipb.Volume, error) {
		req := h.volReq(name, 64<<20)
		req.Parameters["encrypted"] = "true"
		req.Parameters["encryptionKMSID"] = kms
		req.Parameters["csi.storage.k8s.io/pvc/namespace"] = "team-a"
		if withPass {
			req.Secrets["encryptionPassphrase"] = "sc passphrase"
		}
		r, err := h.ctrl.CreateVolume(ctx, req)
		return r.GetVolume(), err
	}
	v, err := create("kms-1", "meta-sc", true)
	require.NoError(t, err)
	im := h.image(v.GetVolumeContext()["imageName"])
	assert.Equal(t, "encryptionPrepared", im.Meta["rbd.csi.ceph.com/encrypted"])
	assert.Equal(t, "meta-sc", im.Meta["purerbd.csi.encryptionKMSID"])
	assert.Equal(t, "team-a", im.Meta["purerbd.csi.owner"])
	var sealed struct{ DEK, Nonce []byte }
	require.NoError(t, json.Unmarshal([]byte(im.Meta["rbd.csi.ceph.com/dek"]), &sealed))
	assert.Len(t, sealed.Nonce, 12)
	assert.Len(t, sealed.DEK, 28+16, "a 28-character key and the GCM tag")

	_, err = create("kms-2", "meta-sc", false)
	assert.Equal(t, codes.InvalidArgument, code(err), "no passphrase in the secret: %v", err)

	v2, err := create("kms-3", "meta-secret", false)
	require.NoError(t, err)
	assert.Equal(t, 1, read["team-a/kms-pass"], "the secret is read in the claim's namespace")
	v3, err := create("kms-4", "meta-fixed", false)
	require.NoError(t, err)
	assert.Equal(t, 1, read["vault-ns/kms-pass"])
	_, err = create("kms-5", "vault", true)
	assert.Equal(t, codes.FailedPrecondition, code(err), "%v", err)
	_, err = create("kms-6", "nowhere", true)
	assert.Equal(t, codes.FailedPrecondition, code(err), "%v", err)

	// A restore gets the key sealed again for its own ID, under the
	// source's KMS, whatever its class says.
	sn := h.createSnapshot("kms-snap", v2.GetVolumeId())
	rr := h.volReq("kms-restore", 0)
	rr.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: sn.GetSnapshotId()}}}
	rv, err := h.ctrl.CreateVolume(ctx, rr)
	require.NoError(t, err)
	src, dst := h.image(v2.GetVolumeContext()["imageName"]), h.image(rv.GetVolume().GetVolumeContext()["imageName"])
	assert.Equal(t, "meta-secret", dst.Meta["purerbd.csi.encryptionKMSID"])
	assert.Equal(t, "team-a", dst.Meta["purerbd.csi.owner"])
	assert.NotEmpty(t, dst.Meta["rbd.csi.ceph.com/dek"])
	assert.NotEqual(t, src.Meta["rbd.csi.ceph.com/dek"], dst.Meta["rbd.csi.ceph.com/dek"])
	assert.Equal(t, 2, read["team-a/kms-pass"], "read once to open the source's key and seal it for the restore")
	_ = v3
}

func TestCheckKMSConfig(t *testing.T) {
	ids, err := csi.CheckKMSConfig([]byte(`{"a": {"encryptionKMSType": "metadata"}, "b": {"KMS_PROVIDER": "metadata", "secretName": "s"}, "v": {"encryptionKMSType": "vault"}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids, "the metadata sections; vault is not usable")
	_, err = csi.CheckKMSConfig([]byte(`{"a": {"secretName": "s"}}`))
	assert.ErrorContains(t, err, `"a" names no encryptionKMSType`)
	_, err = csi.CheckKMSConfig([]byte(`[{"clusterID": "c"}]`))
	assert.ErrorContains(t, err, "not a JSON object of KMS sections")
}

// TestRestoreOfOldMarkIsEncrypted: an image carrying only the
// dot-prefixed mark older ceph-csi releases wrote is encrypted to the
// controller too: its restore carries the mark.
func TestRestoreOfOldMarkIsEncrypted(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	v := h.createVolume("old-mark", 32<<20)
	s, err := h.store.Session(ctx, csi.Cluster{ID: testCluster}, csi.Credentials{ID: testUser, Key: testKey})
	require.NoError(t, err)
	im := h.image(v.GetVolumeContext()["imageName"])
	require.NoError(t, s.SetMetadata(ctx, csi.ImageRef{Pool: im.Pool, Namespace: im.Namespace, Name: im.Name}, ".rbd.csi.ceph.com/encrypted", "encrypted"))
	sn := h.createSnapshot("old-mark-snap", v.GetVolumeId())
	rr := h.volReq("old-mark-restore", 0)
	rr.VolumeContentSource = &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: sn.GetSnapshotId()}}}
	rv, err := h.ctrl.CreateVolume(ctx, rr)
	require.NoError(t, err)
	assert.Equal(t, "encrypted", h.image(rv.GetVolume().GetVolumeContext()["imageName"]).Meta["rbd.csi.ceph.com/encrypted"])
}
