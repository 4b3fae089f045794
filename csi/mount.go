package csi

// Mounting for the node service, with mount(2) itself: no mount binary,
// no util-linux. What is mounted where comes from /proc/self/mountinfo.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// mountInfo is one line of /proc/self/mountinfo.
type mountInfo struct {
	ID, Parent   int
	Major, Minor uint32
	Root         string // the path inside the file system that is mounted
	MountPoint   string
	Options      string // per-mount options ("rw,relatime")
	FsType       string
	Source       string
	SuperOptions string
}

// readOnly reports whether the mount itself is read-only.
func (m mountInfo) readOnly() bool { return hasOption(m.Options, "ro") }

func hasOption(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// parseMountInfo parses the format of proc(5)'s mountinfo.
func parseMountInfo(r io.Reader) ([]mountInfo, error) {
	var l []mountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 7 || sep < 0 || len(f) < sep+3 {
			return nil, fmt.Errorf("mountinfo: malformed line %q", line)
		}
		var m mountInfo
		var err error
		if m.ID, err = strconv.Atoi(f[0]); err != nil {
			return nil, fmt.Errorf("mountinfo: line %q: %w", line, err)
		}
		if m.Parent, err = strconv.Atoi(f[1]); err != nil {
			return nil, fmt.Errorf("mountinfo: line %q: %w", line, err)
		}
		maj, min, ok := strings.Cut(f[2], ":")
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo: line %q: bad device %q", line, f[2])
		}
		m.Major, m.Minor = uint32(a), uint32(b)
		m.Root = unescapeMount(f[3])
		m.MountPoint = unescapeMount(f[4])
		m.Options = f[5]
		m.FsType = unescapeMount(f[sep+1])
		m.Source = unescapeMount(f[sep+2])
		if len(f) > sep+3 {
			m.SuperOptions = f[sep+3]
		}
		l = append(l, m)
	}
	return l, sc.Err()
}

// unescapeMount undoes the octal escapes (\040 for a space...) the kernel
// writes in mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountTable is a snapshot of this process's mounts.
type mountTable []mountInfo

func readMountTable() (mountTable, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	l, err := parseMountInfo(bytes.NewReader(b))
	return mountTable(l), err
}

// resolvePath returns p with every symbolic link in it resolved, the
// way mount(2) resolves a mount point and the kernel lists it in
// mountinfo; p itself, cleaned, when it cannot be resolved (it does not
// exist). Mount points are compared, and unmounted, only by their
// resolved paths: a target reached through a symbolic link would
// otherwise look unmounted, so an unmount would report success without
// unmounting and a retried mount would stack another one.
func resolvePath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// at returns the top mount at path (the last one listed, which hides
// the others), after resolving path.
func (t mountTable) at(path string) (mountInfo, bool) {
	path = resolvePath(path)
	for i := len(t) - 1; i >= 0; i-- {
		if t[i].MountPoint == path {
			return t[i], true
		}
	}
	return mountInfo{}, false
}

// ofDevice returns the mounts of the file system on device major:minor.
func (t mountTable) ofDevice(major, minor uint32) []mountInfo {
	var l []mountInfo
	for _, m := range t {
		if m.Major == major && m.Minor == minor {
			l = append(l, m)
		}
	}
	return l
}

// deviceNumber returns the major and minor number of a block device node.
func deviceNumber(path string) (uint32, uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, 0, fmt.Errorf("%s is not a block device", path)
	}
	return unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), nil
}

// mountOptions is what mount(2) takes: flag bits and a data string.
type mountOptions struct {
	flags uintptr
	data  []string
}

func (o mountOptions) dataString() string { return strings.Join(o.data, ",") }

// vfsFlags are the per-mount flags a bind mount can carry.
const vfsFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
	unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME | unix.MS_STRICTATIME

// flagOptions are the mount options that are mount(2) flag bits rather
// than file system options: the bits they set and clear.
var flagOptions = map[string]struct{ set, clear uintptr }{
	"ro":          {unix.MS_RDONLY, 0},
	"rw":          {0, unix.MS_RDONLY},
	"nosuid":      {unix.MS_NOSUID, 0},
	"suid":        {0, unix.MS_NOSUID},
	"nodev":       {unix.MS_NODEV, 0},
	"dev":         {0, unix.MS_NODEV},
	"noexec":      {unix.MS_NOEXEC, 0},
	"exec":        {0, unix.MS_NOEXEC},
	"sync":        {unix.MS_SYNCHRONOUS, 0},
	"async":       {0, unix.MS_SYNCHRONOUS},
	"dirsync":     {unix.MS_DIRSYNC, 0},
	"noatime":     {unix.MS_NOATIME, 0},
	"atime":       {0, unix.MS_NOATIME},
	"nodiratime":  {unix.MS_NODIRATIME, 0},
	"diratime":    {0, unix.MS_NODIRATIME},
	"relatime":    {unix.MS_RELATIME, 0},
	"norelatime":  {0, unix.MS_RELATIME},
	"strictatime": {unix.MS_STRICTATIME, 0},
	"lazytime":    {unix.MS_LAZYTIME, 0},
	"nolazytime":  {0, unix.MS_LAZYTIME},
	"silent":      {unix.MS_SILENT, 0},
	"loud":        {0, unix.MS_SILENT},
	"defaults":    {0, 0},
}

// refusedOptions change what a mount is rather than how it behaves;
// the node service decides those itself.
var refusedOptions = map[string]bool{
	"bind": true, "rbind": true, "remount": true, "move": true,
	"shared": true, "rshared": true, "private": true, "rprivate": true,
	"slave": true, "rslave": true, "unbindable": true, "runbindable": true,
}

// parseMountFlags turns the mount flags of a volume capability into
// mount(2) arguments. Each flag may itself be a comma-separated list.
// The error never quotes a flag: flags may be sensitive.
func parseMountFlags(flags []string) (mountOptions, error) {
	var o mountOptions
	for i, f := range flags {
		for _, opt := range strings.Split(f, ",") {
			opt = strings.TrimSpace(opt)
			if opt == "" {
				continue
			}
			if b, ok := flagOptions[opt]; ok {
				o.flags = o.flags&^b.clear | b.set
				continue
			}
			if refusedOptions[opt] {
				return mountOptions{}, fmt.Errorf("mount flag %d is %q, which the node service does not take", i, opt)
			}
			for _, c := range opt {
				if c < 0x20 || c == 0x7f {
					return mountOptions{}, fmt.Errorf("mount flag %d has a control character", i)
				}
			}
			o.data = append(o.data, opt)
		}
	}
	return o, nil
}

// mountFS mounts the file system on dev at target.
func mountFS(dev, target, fsType string, o mountOptions) error {
	if err := unix.Mount(dev, target, fsType, o.flags, o.dataString()); err != nil {
		return &fs.PathError{Op: "mount " + fsType + " " + dev + " on", Path: target, Err: err}
	}
	return nil
}

// bindMount bind-mounts source at target, then applies the per-mount
// flags of o (read-only, nosuid...), which a bind mount only takes on a
// remount.
func bindMount(source, target string, o mountOptions) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return &fs.PathError{Op: "bind mount " + source + " on", Path: target, Err: err}
	}
	if f := o.flags & vfsFlags; f != 0 {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|f, ""); err != nil {
			unmount(target)
			return &fs.PathError{Op: "remount bind mount", Path: target, Err: err}
		}
	}
	return nil
}

// unmount unmounts target, retrying for a moment while it is busy (a
// process that is just leaving it). A symbolic link in target is
// resolved first; the resolved path is unmounted without following
// links again.
func unmount(target string) error {
	target = resolvePath(target)
	var err error
	for i := 0; i < 20; i++ {
		err = unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return &fs.PathError{Op: "unmount", Path: target, Err: err}
	}
	return nil
}

// unmountAll unmounts target until nothing is mounted there (mounts may
// be stacked).
func unmountAll(target string) error {
	target = resolvePath(target)
	for range 16 {
		t, err := readMountTable()
		if err != nil {
			return err
		}
		if _, ok := t.at(target); !ok {
			return nil
		}
		if err := unmount(target); err != nil {
			if errors.Is(err, unix.EINVAL) {
				return nil // not a mount point after all
			}
			return err
		}
	}
	return fmt.Errorf("%s: still mounted after 16 unmounts", target)
}
