package rbdstore_test

import (
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func imageInfo(t *testing.T, name string) rbdInfo {
	t.Helper()
	return info(t, cluster.Pool+"/"+name)
}

// TestClassLayoutOnCeph: a class's objectSize, stripeUnit and
// stripeCount (ceph-csi's parameters) shape the image as Ceph's rbd tool
// sees it, and a clone of it made with another layout has that one.
func TestClassLayoutOnCeph(t *testing.T) {
	p := startPlugin(t)
	params := map[string]string{
		"clusterID": cluster.FSID, "pool": cluster.Pool, "volumeNamePrefix": "drv-",
		"imageFormat": "2", "imageFeatures": "layering,exclusive-lock,object-map,fast-diff",
		"objectSize": "8388608", "stripeUnit": "65536", "stripeCount": "8",
		"mounter": "rbd-nbd", "mapOptions": "nbd:io-timeout=60", "encrypted": "false",
	}
	create := func(name string, params map[string]string, src *csipb.VolumeContentSource) *csipb.Volume {
		r, err := p.ctrl.CreateVolume(testCtx(t), &csipb.CreateVolumeRequest{
			Name:          name,
			CapacityRange: &csipb.CapacityRange{RequiredBytes: 256 << 20},
			VolumeCapabilities: []*csipb.VolumeCapability{{
				AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
				AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
			}},
			Parameters: params, Secrets: userSecrets(), VolumeContentSource: src,
		})
		require.NoError(t, err)
		return r.GetVolume()
	}
	v := create("layout-"+randomHex(4), params, nil)
	t.Cleanup(func() { assert.NoError(t, p.deleteVolume(t, v.GetVolumeId())) })
	assert.Equal(t, "nbd:io-timeout=60", v.GetVolumeContext()["mapOptions"], "the node gets the map options")
	info := imageInfo(t, v.GetVolumeContext()["imageName"])
	assert.Equal(t, 23, info.Order)
	assert.Equal(t, uint64(8<<20), info.ObjectSize)
	assert.Equal(t, uint64(64<<10), info.StripeUnit)
	assert.Equal(t, uint64(8), info.StripeCount)
	assert.Contains(t, info.Features, "striping")
	assert.Contains(t, info.Features, "fast-diff")

	// A clone with a layout of its own: 1 MiB objects, 4 KiB x 4.
	clone := map[string]string{}
	for k, val := range params {
		clone[k] = val
	}
	clone["objectSize"], clone["stripeUnit"], clone["stripeCount"] = "1048576", "4096", "4"
	c := create("layout-clone-"+randomHex(4), clone, &csipb.VolumeContentSource{
		Type: &csipb.VolumeContentSource_Volume{Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: v.GetVolumeId()}}})
	t.Cleanup(func() { assert.NoError(t, p.deleteVolume(t, c.GetVolumeId())) })
	ci := imageInfo(t, c.GetVolumeContext()["imageName"])
	assert.Equal(t, 20, ci.Order)
	assert.Equal(t, uint64(4096), ci.StripeUnit)
	assert.Equal(t, uint64(4), ci.StripeCount)

	// Without layout parameters: Ceph's defaults, no striping feature.
	plain := create("layout-plain-"+randomHex(4), map[string]string{
		"clusterID": cluster.FSID, "pool": cluster.Pool, "volumeNamePrefix": "drv-", "imageFormat": "2"}, nil)
	t.Cleanup(func() { assert.NoError(t, p.deleteVolume(t, plain.GetVolumeId())) })
	pi := imageInfo(t, plain.GetVolumeContext()["imageName"])
	assert.Equal(t, 22, pi.Order)
	assert.NotContains(t, pi.Features, "striping")
	assert.Zero(t, pi.StripeCount, "rbd info shows striping only for images that have it")
}
