package rbdstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// TestEncryptedVolumeOnCeph follows an encrypted volume of a class with
// encrypted: "true" through Ceph, with librbd's LUKS layer (qemu's rbd
// driver with encrypt.format=luks2) as the oracle: CreateVolume marks the
// image for formatting (rbd image-meta); the node's first open formats it
// and marks it encrypted; librbd decrypts exactly what the node wrote,
// and the node decrypts what librbd wrote; a wrong passphrase is
// PERMISSION_DENIED.
func TestEncryptedVolumeOnCeph(t *testing.T) {
	const size = 40 << 20
	p := startPlugin(t)
	ctx := testCtx(t)
	r, err := p.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{
		Name:          "enc-vol",
		CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csipb.VolumeCapability{{
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		}},
		Parameters: map[string]string{"clusterID": cluster.FSID, "pool": cluster.Pool, "encrypted": "true"},
		Secrets:    userSecrets(),
	})
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(r.GetVolume().GetVolumeId())
	require.NoError(t, err)
	spec := cluster.Pool + "/" + vid.Image
	meta := func() string {
		return strings.TrimSpace(rbdCLI(t, "image-meta", "get", spec, "rbd.csi.ceph.com/encrypted"))
	}
	assert.Equal(t, "encryptionPrepared", meta())

	pass := "a passphrase from the node-stage secret"
	passFile := filepath.Join(t.TempDir(), "pass")
	require.NoError(t, os.WriteFile(passFile, []byte(pass), 0o600))
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	open := func(passphrase string) (csi.NodeImage, error) {
		img, err := st.OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{Exclusive: true})
		require.NoError(t, err)
		return csi.OpenEncrypted(ctx, img, r.GetVolume().GetVolumeId(), csi.VolumeKeys{Passphrase: []byte(passphrase)}, slog.New(slog.DiscardHandler))
	}

	img, err := open(pass)
	require.NoError(t, err)
	assert.Equal(t, "encrypted", meta())
	require.Equal(t, int64(size-16<<20), img.Size())
	type region struct {
		off  int64
		data []byte
	}
	var regions []region
	for _, w := range []struct{ off, n int64 }{{0, 64 << 10}, {4<<20 - 1000, 3 << 20}, {img.Size() - 4096, 4096}} {
		b := make([]byte, w.n)
		rand.Read(b)
		_, err := img.WriteAtContext(ctx, b, w.off)
		require.NoError(t, err)
		regions = append(regions, region{w.off, b})
	}
	require.NoError(t, img.Flush(ctx))
	require.NoError(t, img.Close())

	opts := fmt.Sprintf("driver=rbd,pool=%s,image=%s,conf=%s,encrypt.format=luks2,encrypt.key-secret=sec0", cluster.Pool, vid.Image, cluster.Conf)
	qemu := func(name string, args ...string) string {
		t.Helper()
		qctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		out, err := cluster.Program(qctx, name, args...)
		require.NoError(t, err, "%s: %s", name, out)
		require.NotContains(t, string(out), "failed", "%s %s", name, strings.Join(args, " "))
		return string(out)
	}
	plainFile := filepath.Join(t.TempDir(), "plain")
	qemu("qemu-img", "dd", "--object", "secret,id=sec0,file="+passFile, "--image-opts", "-O", "raw", "bs=1M", "if="+opts, "of="+plainFile)
	plain, err := os.ReadFile(plainFile)
	require.NoError(t, err)
	require.Len(t, plain, int(size-16<<20), "librbd's plaintext size")
	for _, rg := range regions {
		assert.True(t, bytes.Equal(rg.data, plain[rg.off:rg.off+int64(len(rg.data))]), "librbd reads what the node wrote at %d", rg.off)
	}

	// librbd writes; the node reads.
	qemu("qemu-io", "--object", "secret,id=sec0,file="+passFile, "--image-opts", opts, "-c", "write -P 0x5a 8388608 1048576")
	img, err = open(pass)
	require.NoError(t, err)
	got := make([]byte, 1<<20)
	_, err = img.ReadAtContext(ctx, got, 8<<20)
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte{0x5a}, 1<<20), got, "the node reads what librbd wrote")
	require.NoError(t, img.Close())

	_, err = open("not the passphrase")
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
}

// TestRestoreOfUnstagedEncryptedVolumeOnCeph: a volume of an encrypted
// class that no node ever staged is restored from its snapshot; the
// restore is an RBD clone prepared for formatting as its source was, and
// its first open formats a standalone LUKS2 header on the clone (its
// parent holds neither a header nor data) and serves it: what is written
// reads back after a reopen, the parent's never-written data reads as
// zeroes, and the header is LUKS's own, not a layered clone's.
func TestRestoreOfUnstagedEncryptedVolumeOnCeph(t *testing.T) {
	const size = 40 << 20
	p := startPlugin(t)
	ctx := testCtx(t)
	block := []*csipb.VolumeCapability{{
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
	}}
	params := map[string]string{"clusterID": cluster.FSID, "pool": cluster.Pool, "encrypted": "true"}
	src, err := p.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "enc-unstaged", CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: block, Parameters: params, Secrets: userSecrets()})
	require.NoError(t, err)
	snap, err := p.snapshot(t, "enc-unstaged-snap", src.GetVolume().GetVolumeId())
	require.NoError(t, err)
	r, err := p.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "enc-unstaged-restore", CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: block, Parameters: params, Secrets: userSecrets(),
		VolumeContentSource: &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
			Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}}})
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(r.GetVolume().GetVolumeId())
	require.NoError(t, err)
	spec := cluster.Pool + "/" + vid.Image
	assert.Equal(t, "encryptionPrepared", strings.TrimSpace(rbdCLI(t, "image-meta", "get", spec, "rbd.csi.ceph.com/encrypted")))
	assert.Contains(t, rbdCLI(t, "info", spec), "parent:", "the restore is a clone")

	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	open := func() csi.NodeImage {
		img, err := st.OpenImage(ctx, csiCluster(), admin(), vid, csi.OpenImageOptions{Exclusive: true})
		require.NoError(t, err)
		plain, err := csi.OpenEncrypted(ctx, img, r.GetVolume().GetVolumeId(), csi.VolumeKeys{Passphrase: []byte("pw of the restore")}, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		return plain
	}
	img := open()
	want := make([]byte, 1<<20)
	rand.Read(want)
	_, err = img.WriteAtContext(ctx, want, 5<<20)
	require.NoError(t, err)
	require.NoError(t, img.Flush(ctx))
	require.NoError(t, img.Close())
	assert.Equal(t, "encrypted", strings.TrimSpace(rbdCLI(t, "image-meta", "get", spec, "rbd.csi.ceph.com/encrypted")))

	img = open()
	defer img.Close()
	got := make([]byte, 2<<20)
	_, err = img.ReadAtContext(ctx, got, 4<<20)
	require.NoError(t, err)
	assert.Equal(t, make([]byte, 1<<20), got[:1<<20], "never-written data reads as zeroes")
	assert.Equal(t, want, got[1<<20:], "what the node wrote reads back")

	hdr := filepath.Join(t.TempDir(), "hdr")
	rbdCLI(t, "export", spec, hdr)
	b, err := os.ReadFile(hdr)
	require.NoError(t, err)
	assert.Equal(t, "LUKS\xba\xbe", string(b[:6]), "a standalone LUKS header on the clone")
}
