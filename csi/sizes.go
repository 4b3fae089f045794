package csi

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	mib = 1 << 20
	// defaultVolumeSize is used when a request names no size and has no
	// source to take one from, as ceph-csi does.
	defaultVolumeSize = 1 << 30
	// sizeAlign is the smallest size step: a whole number of 4 KiB
	// sectors suits every filesystem and the NBD block size.
	sizeAlign = 4096
)

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// chooseSize picks a new volume's size within the capacity range: the
// required size rounded up to whole MiB (to 4 KiB if the limit is
// tighter), never below min (the size of a content source).
func chooseSize(cr *csi.CapacityRange, min uint64) (uint64, error) {
	req, lim := cr.GetRequiredBytes(), cr.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Error(codes.InvalidArgument, "capacity range has a negative size")
	}
	if lim > 0 && req > lim {
		return 0, status.Errorf(codes.InvalidArgument, "required bytes %d exceed limit bytes %d", req, lim)
	}
	if lim > 0 && uint64(lim) < min {
		return 0, status.Errorf(codes.OutOfRange, "limit bytes %d are below the content source's size %d", lim, min)
	}
	var size uint64
	switch {
	case req == 0 && min > 0:
		size = min
	case req == 0:
		size = defaultVolumeSize
		if lim > 0 && size > uint64(lim) {
			size = uint64(lim) / sizeAlign * sizeAlign
			if size == 0 {
				return 0, status.Errorf(codes.OutOfRange, "limit bytes %d are below the smallest volume (%d bytes)", lim, sizeAlign)
			}
		}
	default:
		size = roundUp(uint64(req), mib)
		if lim > 0 && size > uint64(lim) {
			size = roundUp(uint64(req), sizeAlign)
			if size > uint64(lim) {
				return 0, status.Errorf(codes.OutOfRange, "no multiple of %d bytes lies between required bytes %d and limit bytes %d", sizeAlign, req, lim)
			}
		}
	}
	if size < min {
		size = min
	}
	return size, nil
}

// sizeFits reports whether an existing volume of size bytes satisfies a
// capacity range.
func sizeFits(size uint64, cr *csi.CapacityRange) bool {
	req, lim := cr.GetRequiredBytes(), cr.GetLimitBytes()
	return size >= uint64(max(req, 0)) && (lim <= 0 || size <= uint64(lim))
}
