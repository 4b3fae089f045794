package csi

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// checkCapabilities validates requested volume capabilities:
//
//   - access type block or mount; mount with fs_type ext4 or xfs (empty
//     means the StorageClass's or the node's default);
//   - single-node modes (RWO, RWOP, SINGLE_NODE_MULTI_WRITER, read-only)
//     for both access types;
//   - MULTI_NODE_READER_ONLY (ROX) only for volumes made from a content
//     source: an empty read-only volume is of no use;
//   - MULTI_NODE_MULTI_WRITER (RWX) and MULTI_NODE_SINGLE_WRITER only for
//     block volumes: no filesystem purerbd makes can be mounted by two
//     nodes at once.
//
// The returned error says which capability is refused and why.
func checkCapabilities(caps []*csi.VolumeCapability, hasSource bool) error {
	if len(caps) == 0 {
		return fmt.Errorf("volume capabilities are required")
	}
	for i, c := range caps {
		if err := checkCapability(c, hasSource); err != nil {
			return fmt.Errorf("volume capability %d: %w", i, err)
		}
	}
	return nil
}

func checkCapability(c *csi.VolumeCapability, hasSource bool) error {
	if c == nil {
		return fmt.Errorf("is empty")
	}
	block := false
	switch t := c.GetAccessType().(type) {
	case *csi.VolumeCapability_Block:
		block = true
	case *csi.VolumeCapability_Mount:
		if fs := t.Mount.GetFsType(); fs != "" {
			if err := checkFsType(fs); err != nil {
				return fmt.Errorf("%s", errorMessage(err))
			}
		}
	default:
		return fmt.Errorf("access type must be block or mount")
	}
	mode := c.GetAccessMode().GetMode()
	switch mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
		return nil
	case csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		if !hasSource {
			return fmt.Errorf("access mode %v needs a volume content source (snapshot or volume): an empty read-only volume is of no use", mode)
		}
		return nil
	case csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER:
		if !block {
			return fmt.Errorf("access mode %v is supported for block volumes only", mode)
		}
		return nil
	default:
		return fmt.Errorf("access mode %v is not supported", mode)
	}
}

// fsTypeOf returns the fs_type of the first mount capability, if any.
func fsTypeOf(caps []*csi.VolumeCapability) string {
	for _, c := range caps {
		if m := c.GetMount(); m != nil && m.GetFsType() != "" {
			return m.GetFsType()
		}
	}
	return ""
}

func isBlock(caps ...*csi.VolumeCapability) bool {
	for _, c := range caps {
		if c.GetBlock() != nil {
			return true
		}
	}
	return false
}
