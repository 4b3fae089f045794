package csi

// File systems for the node service: what a device already holds (read
// from superblock magic numbers, no blkid), making ext4 and xfs, and
// growing them online. The programs (mkfs.ext4, mkfs.xfs, resize2fs,
// xfs_growfs) are not in the plugin's image: they run from a configured
// directory, or from the host's root file system through chroot(2).

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// probeSize is how much of a device is read to find out what it holds.
// It covers every signature checked below, and a device whose first MiB
// is all zeroes is taken as blank.
const probeSize = 1 << 20

// Results of probing a device besides file system names.
const (
	probeBlank   = ""        // nothing but zeroes
	probeUnknown = "unknown" // data, but no signature known here
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
// format by name ("ext4", "xfs", "swap"...), probeBlank or probeUnknown.
// b is the device's first bytes (up to probeSize).
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
			return probeUnknown
		}
	}
	return probeBlank
}

// probeDevice reads the start of dev and probes it.
func probeDevice(ctx context.Context, dev string) (string, error) {
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

// mountableAs reports whether a file system found on a device can be
// mounted as the requested type.
func mountableAs(found, want string) bool {
	switch want {
	case "ext4":
		return found == "ext4" || found == "ext3" || found == "ext2"
	default:
		return found == want
	}
}

// Default mkfs options, as ceph-csi's RBD driver uses them: no reserved
// blocks, no discard of the whole (thin) image, lazy inode table and
// journal initialisation; xfs without discard.
var defaultMkfsOptions = map[string][]string{
	"ext4": {"-m0", "-Enodiscard,lazy_itable_init=1,lazy_journal_init=1"},
	"xfs":  {"-K"},
}

// mkfsArgs returns the program and arguments that make fsType on dev;
// options, when not empty, replace the defaults (the mkfsOptions volume
// parameter, split at white space, and refused unless every option is
// on the allow-list of mkfsoptions.go).
func mkfsArgs(fsType, options, dev string) (string, []string, error) {
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
		if err := checkMkfsOptions(fsType, options); err != nil {
			return "", nil, err
		}
		args = strings.Fields(options)
	}
	return prog, append(append([]string(nil), args...), dev), nil
}

// growArgs returns the program and arguments that grow the mounted file
// system of dev, mounted at mountPoint, to the size of the device.
func growArgs(fsType, dev, mountPoint string) (string, []string, error) {
	switch fsType {
	case "ext4", "ext3", "ext2":
		return "resize2fs", []string{dev}, nil
	case "xfs":
		return "xfs_growfs", []string{"-d", mountPoint}, nil
	}
	return "", nil, fmt.Errorf("cannot grow a %q file system", fsType)
}

// Tools says where the file system programs come from.
type Tools struct {
	// Dir, when set, holds the programs, run as they are (static builds,
	// or a directory the image provides).
	Dir string
	// Root, when set (and Dir is not), is a root file system holding the
	// programs in its sbin or bin directories, typically the host's
	// mounted into the plugin's container at /host. They run chroot'ed
	// into it, so they find their libraries there; device nodes and mount
	// points must be visible at the same paths inside it (the host's /dev,
	// and the kubelet directory with mount propagation).
	Root string
	// Timeout bounds one run (default 10 minutes: mkfs.xfs on a large
	// volume takes a while).
	Timeout time.Duration
}

// searchDirs are where programs are looked for under Root, and on the
// plugin's own file system when neither Dir nor Root is set.
var searchDirs = []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/local/bin"}

// command returns a command that runs prog with args.
func (t Tools) command(ctx context.Context, prog string, args ...string) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	switch {
	case t.Dir != "":
		p := filepath.Join(t.Dir, prog)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is not in the tools directory %s: %w", prog, t.Dir, err)
		}
		cmd = exec.CommandContext(ctx, p, args...)
	case t.Root != "":
		var inside string
		for _, d := range searchDirs {
			if st, err := os.Stat(filepath.Join(t.Root, d, prog)); err == nil && st.Mode().IsRegular() {
				inside = filepath.Join(d, prog)
				break
			}
		}
		if inside == "" {
			return nil, fmt.Errorf("%s is not in %s under %s: %w", prog, strings.Join(searchDirs, ", "), t.Root, fs.ErrNotExist)
		}
		cmd = exec.CommandContext(ctx, inside, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: t.Root}
		cmd.Dir = "/"
	default:
		p, err := exec.LookPath(prog)
		if err != nil {
			for _, d := range searchDirs {
				if st, serr := os.Stat(filepath.Join(d, prog)); serr == nil && st.Mode().IsRegular() {
					p, err = filepath.Join(d, prog), nil
					break
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s not found (configure a tools directory or the host root): %w", prog, err)
		}
		cmd = exec.CommandContext(ctx, p, args...)
	}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// run runs prog and returns its combined output; the error carries the
// end of that output.
func (t Tools) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd, err := t.command(ctx, prog, args...)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 2000 {
			msg = "..." + msg[len(msg)-2000:]
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, msg)
	}
	return out.Bytes(), nil
}
