// Package fstools makes and grows the file systems of the CSI node
// service with their own programs (mkfs.ext4, mkfs.xfs, resize2fs,
// xfs_growfs): the arguments each takes, the allow-list a volume's
// mkfsOptions are checked against, and a Runner that runs the programs.
// They are not in the plugin's image: they run from a configured
// directory, or from the host's root file system through chroot(2).
package fstools

import (
	"fmt"
	"strings"
)

// Default mkfs options, as ceph-csi's RBD driver uses them: no reserved
// blocks, no discard of the whole (thin) image, lazy inode table and
// journal initialisation; xfs without discard.
var defaultMkfsOptions = map[string][]string{
	"ext4": {"-m0", "-Enodiscard,lazy_itable_init=1,lazy_journal_init=1"},
	"xfs":  {"-K"},
}

// MkfsArgs returns the program and arguments that make fsType on dev;
// options, when not empty, replace the defaults (the mkfsOptions volume
// parameter, split at white space, and refused unless every option is
// on the allow-list, see CheckMkfsOptions).
func MkfsArgs(fsType, options, dev string) (string, []string, error) {
	var prog string
	switch fsType {
	case "ext4":
		prog = "mkfs.ext4"
	case "xfs":
		prog = "mkfs.xfs"
	default:
		return "", nil, fmt.Errorf("cannot make a %q file system", fsType)
	}
	args := defaultMkfsOptions[fsType]
	if strings.TrimSpace(options) != "" {
		if err := CheckMkfsOptions(fsType, options); err != nil {
			return "", nil, err
		}
		args = strings.Fields(options)
	}
	return prog, append(append([]string(nil), args...), dev), nil
}

// GrowArgs returns the program and arguments that grow the mounted file
// system of dev, mounted at mountPoint, to the size of the device.
func GrowArgs(fsType, dev, mountPoint string) (string, []string, error) {
	switch fsType {
	case "ext4", "ext3", "ext2":
		return "resize2fs", []string{dev}, nil
	case "xfs":
		return "xfs_growfs", []string{"-d", mountPoint}, nil
	}
	return "", nil, fmt.Errorf("cannot grow a %q file system", fsType)
}
