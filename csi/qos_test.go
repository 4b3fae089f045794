package csi_test

import (
	"context"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// imageQoS returns the QoS options in the metadata of the harness's
// image name.
func (h *harness) imageQoS(name string) map[string]string {
	h.t.Helper()
	for _, im := range h.store.Images(testCluster) {
		if im.Name == name {
			out := map[string]string{}
			for k, v := range im.Meta {
				if strings.HasPrefix(k, "conf_rbd_qos_") {
					out[k] = v
				}
			}
			return out
		}
	}
	h.t.Fatalf("no image %q", name)
	return nil
}

// TestModifyVolumeQoS: mutable parameters are librbd's QoS options,
// written into the image's metadata as `rbd config image set` writes
// them, at CreateVolume and by ControllerModifyVolume; anything else is
// refused with INVALID_ARGUMENT.
func TestModifyVolumeQoS(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	caps, err := h.ctrl.ControllerGetCapabilities(ctx, &csipb.ControllerGetCapabilitiesRequest{})
	require.NoError(t, err)
	found := false
	for _, c := range caps.GetCapabilities() {
		found = found || c.GetRpc().GetType() == csipb.ControllerServiceCapability_RPC_MODIFY_VOLUME
	}
	assert.True(t, found, "MODIFY_VOLUME not advertised")

	req := h.volReq("qos", 8<<20)
	req.MutableParameters = map[string]string{"rbd_qos_iops_limit": "100", "rbd_qos_write_bps_limit": " 1048576"}
	r, err := h.ctrl.CreateVolume(ctx, req)
	require.NoError(t, err)
	var name string
	for _, im := range h.store.Images(testCluster) {
		name = im.Name
	}
	assert.Equal(t, map[string]string{"conf_rbd_qos_iops_limit": "100", "conf_rbd_qos_write_bps_limit": "1048576"}, h.imageQoS(name))

	id := r.GetVolume().GetVolumeId()
	_, err = h.ctrl.ControllerModifyVolume(ctx, &csipb.ControllerModifyVolumeRequest{VolumeId: id, Secrets: secrets(),
		MutableParameters: map[string]string{"rbd_qos_iops_limit": "500", "rbd_qos_iops_burst": "1000", "rbd_qos_write_bps_limit": "0"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"conf_rbd_qos_iops_limit": "500", "conf_rbd_qos_iops_burst": "1000", "conf_rbd_qos_write_bps_limit": "0"}, h.imageQoS(name))

	for _, bad := range []map[string]string{
		nil,
		{"rbd_cache": "false"},
		{"rbd_qos_iops_limit": "many"},
		{"rbd_qos_iops_limit": "-5"},
		{"rbd_qos_iops_limit": "100", "rbd_qos_iops_burst": "50"},
		{"rbd_qos_bps_burst_seconds": "0"},
	} {
		_, err = h.ctrl.ControllerModifyVolume(ctx, &csipb.ControllerModifyVolumeRequest{VolumeId: id, Secrets: secrets(), MutableParameters: bad})
		assert.Equal(t, codes.InvalidArgument, code(err), "%v: %v", bad, err)
	}
	req = h.volReq("qos-bad", 8<<20)
	req.MutableParameters = map[string]string{"qosClass": "gold"}
	_, err = h.ctrl.CreateVolume(ctx, req)
	assert.Equal(t, codes.InvalidArgument, code(err))
	// the plugin's own credentials never authorise a change
	_, err = h.ctrl.ControllerModifyVolume(ctx, &csipb.ControllerModifyVolumeRequest{VolumeId: id,
		MutableParameters: map[string]string{"rbd_qos_iops_limit": "1"}})
	assert.Equal(t, codes.InvalidArgument, code(err), "%v", err)
	_, err = h.ctrl.ControllerModifyVolume(ctx, &csipb.ControllerModifyVolumeRequest{VolumeId: "nope", Secrets: secrets(),
		MutableParameters: map[string]string{"rbd_qos_iops_limit": "1"}})
	assert.Equal(t, codes.NotFound, code(err))
	assert.Equal(t, "500", h.imageQoS(name)["conf_rbd_qos_iops_limit"], "a refused change left the limits")
}
