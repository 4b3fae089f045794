// Package fsprobe tells what the start of a block device holds: a file
// system or another format, found by its superblock's magic number (no
// blkid), nothing but zeroes, or data it does not know. The CSI node
// service formats only blank devices and mounts only the file system it
// was asked for.
package fsprobe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// probeSize is how much of a device is read to find out what it holds.
// It covers every signature checked below, and a device whose first MiB
// is all zeroes is taken as blank.
const probeSize = 1 << 20

// Results of probing a device besides file system names.
const (
	Blank   = ""        // nothing but zeroes
	Unknown = "unknown" // data, but no signature known here
)

// signature is a magic number at an offset.
type signature struct {
	name  string
	off   int
	magic string
}

// signatures of what may already be on a volume; formatting over any of
// them would destroy data.
var signatures = []signature{
	{"xfs", 0, "XFSB"},
	{"btrfs", 0x10040, "_BHRfS_M"},
	{"crypto_LUKS", 0, "LUKS\xba\xbe"},
	{"squashfs", 0, "hsqs"},
	{"LVM2_member", 0x218, "LVM2 001"},
	{"swap", 4096 - 10, "SWAPSPACE2"},
	{"swap", 4096 - 10, "SWAP-SPACE"},
	{"iso9660", 0x8001, "CD001"},
	{"gpt", 0x200, "EFI PART"},
	{"f2fs", 0x400, "\x10\x20\xf5\xf2"},
	{"bcache", 0x1018, "\xc6\x85\x73\xf6\x4e\x1a\x45\xca\x82\x65\xf5\x7f\x48\xba\x6d\x81"},
}

// ext2/3/4 superblock: at 1024, magic 0xEF53 at +56, feature words at
// +92 (compat), +96 (incompat), +100 (ro_compat).
const (
	extSuperblock = 1024
	extMagic      = 0xEF53
	extHasJournal = 0x4
	// extents, 64bit, flex_bg, ea_inode, csum_seed, largedir, inline_data,
	// encrypt: incompatible features ext2 and ext3 do not have.
	extIncompatExt4 = 0x40 | 0x80 | 0x200 | 0x400 | 0x2000 | 0x4000 | 0x8000 | 0x10000
)

// probeFS says what the start of a device holds: a file system or other
// format by name ("ext4", "xfs", "swap"...), Blank or Unknown. b is the
// device's first bytes (up to probeSize).
func probeFS(b []byte) string {
	if len(b) >= extSuperblock+104 && binary.LittleEndian.Uint16(b[extSuperblock+56:]) == extMagic {
		compat := binary.LittleEndian.Uint32(b[extSuperblock+92:])
		incompat := binary.LittleEndian.Uint32(b[extSuperblock+96:])
		switch {
		case incompat&extIncompatExt4 != 0:
			return "ext4"
		case compat&extHasJournal != 0:
			return "ext3"
		default:
			return "ext2"
		}
	}
	for _, s := range signatures {
		if len(b) >= s.off+len(s.magic) && string(b[s.off:s.off+len(s.magic)]) == s.magic {
			return s.name
		}
	}
	// A DOS partition table, or a FAT/NTFS boot sector.
	if len(b) >= 512 && b[510] == 0x55 && b[511] == 0xaa {
		return "dos"
	}
	for _, c := range b {
		if c != 0 {
			return Unknown
		}
	}
	return Blank
}

// Device reads the start of dev and says what it holds: a file system or
// other format by name ("ext4", "xfs", "swap"...), Blank or Unknown.
func Device(ctx context.Context, dev string) (string, error) {
	f, err := os.Open(dev)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, probeSize)
	n, err := readFullContext(ctx, f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("probing %s: %w", dev, err)
	}
	return probeFS(b[:n]), nil
}

// readFullContext reads until b is full or the file ends, checking ctx
// between reads.
func readFullContext(ctx context.Context, f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := f.Read(b[n:min(len(b), n+256<<10)])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// MountableAs reports whether a file system found on a device can be
// mounted as the requested type.
func MountableAs(found, want string) bool {
	switch want {
	case "ext4":
		return found == "ext4" || found == "ext3" || found == "ext2"
	default:
		return found == want
	}
}
