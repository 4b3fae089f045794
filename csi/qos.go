package csi

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Live per-volume QoS: a volume's mutable parameters (Kubernetes'
// VolumeAttributesClass, given at CreateVolume and changed by
// ControllerModifyVolume) are librbd's QoS options, rbd_qos_iops_limit
// and its kin, stored where librbd and purerbd read them, the image's
// metadata (conf_rbd_qos_*, as `rbd config image set` writes them). The
// write notifies the image's header, so the node serving the volume
// applies the new limits within a round trip, without a remount; a
// librbd client (rbd-nbd, qemu) does the same. "0" lifts a limit.

// qosParamNames are the mutable parameters: each of librbd's throttles
// with its limit, burst and burst seconds.
func qosParamNames() []string {
	var out []string
	for _, t := range []string{"iops", "read_iops", "write_iops", "bps", "read_bps", "write_bps"} {
		for _, s := range []string{"limit", "burst", "burst_seconds"} {
			out = append(out, "rbd_qos_"+t+"_"+s)
		}
	}
	return out
}

// qosMetadataPrefix makes a librbd option an image metadata key.
const qosMetadataPrefix = "conf_"

// parseQoSParams checks mutable parameters: only librbd's QoS options,
// each a whole number, a burst not below its limit.
func parseQoSParams(params map[string]string) (map[string]string, error) {
	names := qosParamNames()
	out := make(map[string]string, len(params))
	for k, v := range params {
		if !slices.Contains(names, k) {
			return nil, status.Errorf(codes.InvalidArgument, "mutable parameter %q is not supported (librbd's QoS options are: %s)", k, strings.Join(names, ", "))
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "mutable parameter %s=%q: want a whole number", k, v)
		}
		if strings.HasSuffix(k, "_burst_seconds") && n == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "mutable parameter %s: want at least 1", k)
		}
		out[k] = strconv.FormatUint(n, 10)
	}
	for k, v := range out {
		base, ok := strings.CutSuffix(k, "_burst")
		if !ok {
			continue
		}
		burst, _ := strconv.ParseUint(v, 10, 64)
		if l, ok := out[base+"_limit"]; ok {
			if limit, _ := strconv.ParseUint(l, 10, 64); burst != 0 && burst < limit {
				return nil, status.Errorf(codes.InvalidArgument, "mutable parameter %s %d is below %s_limit %d", k, burst, base, limit)
			}
		}
	}
	return out, nil
}

// setQoS writes the options into the image's metadata (each write
// notifies the image's header).
func setQoS(ctx context.Context, s Session, cred Credentials, img ImageRef, qos map[string]string) error {
	keys := make([]string, 0, len(qos))
	for k := range qos {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := s.SetMetadata(ctx, img, qosMetadataPrefix+k, qos[k]); err != nil {
			return storeError(err, cred, "setting %s of image %q", k, img.Name)
		}
	}
	return nil
}

// ControllerModifyVolume applies new mutable parameters (librbd's QoS
// options) to a volume, live.
func (c *controller) ControllerModifyVolume(ctx context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	d := c.d
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if len(req.GetMutableParameters()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "mutable parameters are required")
	}
	qos, err := parseQoSParams(req.GetMutableParameters())
	if err != nil {
		return nil, err
	}
	unlock, err := d.inFlight.lock("volume " + req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	vid, cred, s, _, err := d.volumeByID(ctx, req.GetVolumeId(), req.GetSecrets(), changing)
	if err != nil {
		return nil, err
	}
	if err := setQoS(ctx, s, cred, vid.ref(), qos); err != nil {
		return nil, fmt.Errorf("modifying volume %q: %w", req.GetVolumeId(), err)
	}
	return &csi.ControllerModifyVolumeResponse{}, nil
}
