// Package mount mounts and unmounts file systems for the CSI node
// service with mount(2) itself (no mount binary, no util-linux), turns
// a volume capability's mount flags into mount(2) arguments, and reads
// what is mounted where from /proc/self/mountinfo.
package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Options is what mount(2) takes: flag bits and the items of its data
// string.
type Options struct {
	Flags uintptr
	Data  []string
}

func (o Options) dataString() string { return strings.Join(o.Data, ",") }

// VFSFlags are the per-mount flags a bind mount can carry.
const VFSFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
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

// ParseFlags turns the mount flags of a volume capability into mount(2)
// arguments. Each flag may itself be a comma-separated list. The error
// never quotes a flag: flags may be sensitive.
func ParseFlags(flags []string) (Options, error) {
	var o Options
	for i, f := range flags {
		for _, opt := range strings.Split(f, ",") {
			opt = strings.TrimSpace(opt)
			if opt == "" {
				continue
			}
			if b, ok := flagOptions[opt]; ok {
				o.Flags = o.Flags&^b.clear | b.set
				continue
			}
			if refusedOptions[opt] {
				return Options{}, fmt.Errorf("mount flag %d is %q, which the node service does not take", i, opt)
			}
			for _, c := range opt {
				if c < 0x20 || c == 0x7f {
					return Options{}, fmt.Errorf("mount flag %d has a control character", i)
				}
			}
			o.Data = append(o.Data, opt)
		}
	}
	return o, nil
}

// FS mounts the file system on dev at target.
func FS(dev, target, fsType string, o Options) error {
	if err := unix.Mount(dev, target, fsType, o.Flags, o.dataString()); err != nil {
		return &fs.PathError{Op: "mount " + fsType + " " + dev + " on", Path: target, Err: err}
	}
	return nil
}

// Bind bind-mounts source at target, then applies the per-mount flags
// of o (read-only, nosuid...), which a bind mount only takes on a
// remount.
func Bind(source, target string, o Options) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return &fs.PathError{Op: "bind mount " + source + " on", Path: target, Err: err}
	}
	if f := o.Flags & VFSFlags; f != 0 {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|f, ""); err != nil {
			Unmount(target)
			return &fs.PathError{Op: "remount bind mount", Path: target, Err: err}
		}
	}
	return nil
}

// Unmount unmounts target, retrying for a moment while it is busy (a
// process that is just leaving it). A symbolic link in target is
// resolved first; the resolved path is unmounted without following
// links again.
func Unmount(target string) error {
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

// UnmountAll unmounts target until nothing is mounted there (mounts may
// be stacked).
func UnmountAll(target string) error {
	target = resolvePath(target)
	for range 16 {
		t, err := ReadTable()
		if err != nil {
			return err
		}
		if _, ok := t.At(target); !ok {
			return nil
		}
		if err := Unmount(target); err != nil {
			if errors.Is(err, unix.EINVAL) {
				return nil // not a mount point after all
			}
			return err
		}
	}
	return fmt.Errorf("%s: still mounted after 16 unmounts", target)
}
