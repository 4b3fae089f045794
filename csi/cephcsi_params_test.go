package csi_test

import (
	"context"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/fakestore"
)

// The StorageClass and VolumeSnapshotClass parameters of ceph-csi's and
// Rook's shipped examples, as literal maps: clusterID and pool are filled
// in where the examples have placeholders, nothing else is changed.

// cephCSIStorageClass is ceph-csi's examples/rbd/storageclass.yaml
// (ceph/ceph-csi 52fcb7b), the parameters it sets.
var cephCSIStorageClass = map[string]string{
	"clusterID":     "ceph-csi",
	"pool":          "rbd",
	"imageFeatures": "layering",
	"csi.storage.k8s.io/provisioner-secret-name":            "csi-rbd-secret",
	"csi.storage.k8s.io/provisioner-secret-namespace":       "default",
	"csi.storage.k8s.io/controller-expand-secret-name":      "csi-rbd-secret",
	"csi.storage.k8s.io/controller-expand-secret-namespace": "default",
	"csi.storage.k8s.io/node-stage-secret-name":             "csi-rbd-secret",
	"csi.storage.k8s.io/node-stage-secret-namespace":        "default",
	"csi.storage.k8s.io/fstype":                             "ext4",
}

// cephCSIStorageClassOptional is the same file with every optional
// parameter it documents in comments uncommented, with the example values
// given there (encrypted with "false", the only value purerbd takes;
// tryOtherMounters with its default; striping with values, as the file
// gives none).
var cephCSIStorageClassOptional = map[string]string{
	"clusterID":                 "ceph-csi",
	"dataPool":                  "ec-data",
	"pool":                      "rbd",
	"imageFeatures":             "layering",
	"mkfsOptions":               "-m0 -Ediscard -i1024",
	"tryOtherMounters":          "false",
	"mapOptions":                "krbd:lock_on_read,queue_depth=1024;nbd:try-netlink",
	"unmapOptions":              "krbd:force;nbd:force",
	"csi.storage.k8s.io/fstype": "ext4",
	"mounter":                   "rbd-nbd",
	"cephLogDir":                "/var/log/ceph",
	"cephLogStrategy":           "remove",
	"volumeNamePrefix":          "foo-bar-",
	"encrypted":                 "false",
	"encryptionType":            "block",
	"encryptionKMSID":           "kms-1",
	"stripeUnit":                "65536",
	"stripeCount":               "16",
	"objectSize":                "8388608",
	"csi.storage.k8s.io/provisioner-secret-name":      "csi-rbd-secret",
	"csi.storage.k8s.io/provisioner-secret-namespace": "default",
	"csi.storage.k8s.io/node-stage-secret-name":       "csi-rbd-secret",
	"csi.storage.k8s.io/node-stage-secret-namespace":  "default",
}

// rookStorageClass is Rook's deploy/examples/csi/rbd/storageclass.yaml
// (rook/rook d0c3b9c), the rook-ceph-block class's parameters.
var rookStorageClass = map[string]string{
	"clusterID":     "rook-ceph",
	"pool":          "replicapool",
	"imageFormat":   "2",
	"imageFeatures": "layering",
	"csi.storage.k8s.io/provisioner-secret-name":             "rook-csi-rbd-provisioner",
	"csi.storage.k8s.io/provisioner-secret-namespace":        "rook-ceph",
	"csi.storage.k8s.io/controller-expand-secret-name":       "rook-csi-rbd-provisioner",
	"csi.storage.k8s.io/controller-expand-secret-namespace":  "rook-ceph",
	"csi.storage.k8s.io/controller-publish-secret-name":      "rook-csi-rbd-provisioner",
	"csi.storage.k8s.io/controller-publish-secret-namespace": "rook-ceph",
	"csi.storage.k8s.io/node-stage-secret-name":              "rook-csi-rbd-node",
	"csi.storage.k8s.io/node-stage-secret-namespace":         "rook-ceph",
	"csi.storage.k8s.io/controller-modify-secret-name":       "rook-csi-rbd-provisioner",
	"csi.storage.k8s.io/controller-modify-secret-namespace":  "rook-ceph",
	"csi.storage.k8s.io/node-publish-secret-name":            "rook-csi-rbd-node",
	"csi.storage.k8s.io/node-publish-secret-namespace":       "rook-ceph",
	"csi.storage.k8s.io/fstype":                              "ext4",
}

// rookStorageClassNBD is Rook's class with the mounter line it offers
// ("uncomment the following to use rbd-nbd") and its commented
// mapOptions, which name krbd options without a mounter section.
var rookStorageClassNBD = func() map[string]string {
	m := map[string]string{"mounter": "rbd-nbd", "mapOptions": "lock_on_read,queue_depth=1024", "unmapOptions": "force"}
	for k, v := range rookStorageClass {
		m[k] = v
	}
	return m
}()

// The snapshot classes: ceph-csi's examples/rbd/snapshotclass.yaml (with
// its commented snapshotNamePrefix) and Rook's
// deploy/examples/csi/rbd/snapshotclass.yaml.
var (
	cephCSISnapshotClass = map[string]string{
		"clusterID":          "ceph-csi",
		"snapshotNamePrefix": "foo-bar-",
		"csi.storage.k8s.io/snapshotter-secret-name":      "csi-rbd-secret",
		"csi.storage.k8s.io/snapshotter-secret-namespace": "default",
	}
	rookSnapshotClass = map[string]string{
		"clusterID": "rook-ceph",
		"csi.storage.k8s.io/snapshotter-secret-name":      "rook-csi-rbd-provisioner",
		"csi.storage.k8s.io/snapshotter-secret-namespace": "rook-ceph",
	}
)

// newCephCSIHarness is a harness whose cluster config names the clusters
// of the examples, "ceph-csi" and "rook-ceph", with their pools.
func newCephCSIHarness(t *testing.T) *harness {
	h := newHarness(t, harnessOpts{configJSON: `[{"clusterID": "ceph-csi", "monitors": ["127.0.0.1:3300"]},
		{"clusterID": "rook-ceph", "monitors": ["127.0.0.1:3300"]}]`})
	users := map[string]string{testUser: testKey}
	h.store.AddCluster("ceph-csi", users)
	h.store.AddPool("ceph-csi", "rbd", 100<<30)
	h.store.AddPool("ceph-csi", "ec-data", 100<<30)
	h.store.AddCluster("rook-ceph", users)
	h.store.AddPool("rook-ceph", "replicapool", 100<<30)
	return h
}

// TestCephCSIClassesProvision feeds the example classes to CreateVolume
// and CreateSnapshot and checks they are accepted and mapped: the image
// options the store gets, the volume context the node gets.
func TestCephCSIClassesProvision(t *testing.T) {
	h := newCephCSIHarness(t)
	ctx := context.Background()
	for _, c := range []struct {
		source string
		params map[string]string
		snap   map[string]string
		opts   csi.ImageOptions
		vc     map[string]string // volume context keys the node needs
		prefix string
	}{
		{
			source: "ceph-csi examples/rbd/storageclass.yaml", params: cephCSIStorageClass, snap: cephCSISnapshotClass,
			opts:   csi.ImageOptions{Features: []string{"layering"}},
			vc:     map[string]string{"clusterID": "ceph-csi", "pool": "rbd", "fsType": "ext4"},
			prefix: "csi-vol-",
		},
		{
			source: "ceph-csi examples/rbd/storageclass.yaml, optional parameters", params: cephCSIStorageClassOptional, snap: cephCSISnapshotClass,
			opts: csi.ImageOptions{Features: []string{"layering"}, DataPool: "ec-data", Order: 23, StripeUnit: 64 << 10, StripeCount: 16},
			vc: map[string]string{"clusterID": "ceph-csi", "pool": "rbd", "fsType": "ext4", "dataPool": "ec-data",
				"mkfsOptions": "-m0 -Ediscard -i1024", "mapOptions": "krbd:lock_on_read,queue_depth=1024;nbd:try-netlink"},
			prefix: "foo-bar-",
		},
		{
			source: "rook deploy/examples/csi/rbd/storageclass.yaml", params: rookStorageClass, snap: rookSnapshotClass,
			opts:   csi.ImageOptions{Features: []string{"layering"}},
			vc:     map[string]string{"clusterID": "rook-ceph", "pool": "replicapool", "fsType": "ext4"},
			prefix: "csi-vol-",
		},
		{
			source: "ceph-csi's class with purerbd's deviceType: ublk", params: withParam(cephCSIStorageClass, "deviceType", "ublk"), snap: cephCSISnapshotClass,
			opts:   csi.ImageOptions{Features: []string{"layering"}},
			vc:     map[string]string{"clusterID": "ceph-csi", "pool": "rbd", "fsType": "ext4", "deviceType": "ublk"},
			prefix: "csi-vol-",
		},
		{
			source: "ceph-csi's class with deviceType: auto (the node's choice, so not in the context)", params: withParam(cephCSIStorageClass, "deviceType", "auto"), snap: cephCSISnapshotClass,
			opts:   csi.ImageOptions{Features: []string{"layering"}},
			vc:     map[string]string{"clusterID": "ceph-csi", "pool": "rbd", "fsType": "ext4", "deviceType": ""},
			prefix: "csi-vol-",
		},
		{
			source: "rook deploy/examples/csi/rbd/storageclass.yaml with mounter: rbd-nbd", params: rookStorageClassNBD, snap: rookSnapshotClass,
			opts:   csi.ImageOptions{Features: []string{"layering"}},
			vc:     map[string]string{"clusterID": "rook-ceph", "pool": "replicapool", "fsType": "ext4", "mapOptions": "lock_on_read,queue_depth=1024"},
			prefix: "csi-vol-",
		},
	} {
		t.Run(c.source, func(t *testing.T) {
			req := h.volReq("pvc-"+strings.ReplaceAll(c.source, " ", "-"), 1<<30)
			req.Parameters = c.params
			req.VolumeCapabilities[0].GetMount().FsType = "" // the class's fstype decides
			r, err := h.ctrl.CreateVolume(ctx, req)
			require.NoError(t, err, c.source)
			vc := r.GetVolume().GetVolumeContext()
			for k, v := range c.vc {
				assert.Equal(t, v, vc[k], "volume context %s", k)
			}
			for _, k := range []string{"mounter", "encrypted", "cephLogDir", "imageFormat"} {
				assert.NotContains(t, vc, k, "the node has no use for %s", k)
			}
			assert.True(t, strings.HasPrefix(vc["imageName"], c.prefix), vc["imageName"])
			img := findImage(t, h.store.Images(c.params["clusterID"]), vc["imageName"])
			assert.Equal(t, c.opts, img.Options, "image options")

			sr, err := h.ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{
				Name: "snap-" + req.Name, SourceVolumeId: r.GetVolume().GetVolumeId(), Secrets: secrets(), Parameters: c.snap})
			require.NoError(t, err, "snapshot class of %s", c.source)
			require.NoError(t, h.deleteSnapshot(sr.GetSnapshot().GetSnapshotId()))
			require.NoError(t, h.deleteVolume(r.GetVolume().GetVolumeId()))
		})
	}
}

// withParam returns a copy of params with key set to value.
func withParam(params map[string]string, key, value string) map[string]string {
	m := make(map[string]string, len(params)+1)
	for k, v := range params {
		m[k] = v
	}
	m[key] = value
	return m
}

func findImage(t *testing.T, imgs []fakestore.ImageState, name string) fakestore.ImageState {
	t.Helper()
	for _, im := range imgs {
		if im.Name == name {
			return im
		}
	}
	t.Fatalf("no image %s", name)
	return fakestore.ImageState{}
}

// TestCephCSIParameterRefusals: what purerbd cannot do is refused with
// INVALID_ARGUMENT, a message that says why and what to use instead, and
// nothing made.
func TestCephCSIParameterRefusals(t *testing.T) {
	h := newCephCSIHarness(t)
	ctx := context.Background()
	for _, c := range []struct {
		key, value string
		msg        string
	}{
		{"imageFormat", "1", `makes only format 2 images`},
		{"imageFormat", "3", `set "2" or leave it out`},
		{"mounter", "krbd", `does not map images with the kernel's rbd driver`},
		{"mounter", "rbd", `set mounter to "rbd-nbd" or leave it out`},
		{"mounter", "fuse", `not a ceph-csi mounter`},
		{"encrypted", "maybe", `want "true" or "false"`},
		{"thickProvision", "true", `makes thin images`},
		{"tryOtherMounters", "sometimes", `want "true" or "false"`},
		{"topologyConstrainedPools", `{"poolName":"pool0"}`, `not a JSON list`},
		{"topologyConstrainedPools", `[]`, `an empty list`},
		{"topologyConstrainedPools", `[{"pool":"pool0"}]`, `unknown field "pool"`},
		{"topologyConstrainedPools", `[{"dataPool":"ec"}]`, `entry 0 has no poolName`},
		{"topologyConstrainedPools", `[{"poolName":"p","domainSegments":[{"value":"a"}]}]`, `segment without domainLabel`},
		{"imageFeatures", "layering,exclusive-lock,journaling", `mirror with snapshots`},
		{"mapOptions", "nbd:notrim", `mount without discard`},
		{"mapOptions", "nbd:io-timeout=0", `the node's own default`},
		{"mapOptions", "nbd:reattach-timeout=0", `fail every I/O`},
		{"mapOptions", "nbd:rbd_cache=true", `not known to purerbd (it honours io-timeout and reattach-timeout`},
		{"mapOptions", "fuse:x", `unknown mounter "fuse"`},
		{"unmapOptions", "fuse:x", `unknown mounter "fuse"`},
		{"stripeUnit", "65536", `stripeUnit needs stripeCount`},
		{"stripeCount", "4", `stripeCount needs stripeUnit`},
		{"objectSize", "3000000", `not a power of two`},
		{"objectSize", "67108864", `not a power of two from 4096 (4 KiB) to 33554432 (32 MiB)`},
		{"objectSize", "0", `leave it out for the default`},
		{"objectSize", "4M", `not a number of bytes`},
		{"deviceType", "rbd", `want auto, nbd or ublk`},
	} {
		params := map[string]string{}
		for k, v := range cephCSIStorageClass {
			params[k] = v
		}
		params[c.key] = c.value
		req := h.volReq("refused", 1<<30)
		req.Parameters = params
		_, err := h.ctrl.CreateVolume(ctx, req)
		assert.Equal(t, codes.InvalidArgument, code(err), "%s=%s: %v", c.key, c.value, err)
		assert.Contains(t, status.Convert(err).Message(), c.msg, "%s=%s", c.key, c.value)
	}
	// Striping that does not fit the object size.
	params := map[string]string{"clusterID": "ceph-csi", "pool": "rbd", "stripeUnit": "3000", "stripeCount": "2"}
	req := h.volReq("refused", 1<<30)
	req.Parameters = params
	_, err := h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.InvalidArgument, code(err))
	assert.Contains(t, status.Convert(err).Message(), "does not divide the object size 4194304")
	params["objectSize"], params["stripeUnit"] = "65536", "131072"
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.InvalidArgument, code(err))
	assert.Contains(t, status.Convert(err).Message(), "does not divide the object size 65536")
	assert.Empty(t, h.store.Images("ceph-csi"), "nothing made")
}
