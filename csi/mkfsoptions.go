package csi

import "github.com/purerbd/purerbd/csi/internal/fstools"

// checkClassMkfsOptions is the controller's check of a StorageClass's
// mkfsOptions against the node's allow-list (package fstools), so a
// class that would be refused at every NodeStage is refused at
// CreateVolume already. Without an fsType the node's default decides, so
// options valid for any file system the node makes pass; the node checks
// again before it runs mkfs.
func checkClassMkfsOptions(fsType, options string) error {
	if options == "" {
		return nil
	}
	if fsType != "" {
		return fstools.CheckMkfsOptions(fsType, options)
	}
	var first error
	for _, fs := range supportedFsTypes {
		err := fstools.CheckMkfsOptions(fs, options)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}
