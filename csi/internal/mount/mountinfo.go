package mount

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Info is one line of /proc/self/mountinfo.
type Info struct {
	ID, Parent   int
	Major, Minor uint32
	Root         string // the path inside the file system that is mounted
	MountPoint   string
	Options      string // per-mount options ("rw,relatime")
	FsType       string
	Source       string
	SuperOptions string
}

// ReadOnly reports whether the mount itself is read-only.
func (m Info) ReadOnly() bool { return hasOption(m.Options, "ro") }

func hasOption(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// parseMountInfo parses the format of proc(5)'s mountinfo.
func parseMountInfo(r io.Reader) ([]Info, error) {
	var l []Info
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
		var m Info
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

// Table is a snapshot of this process's mounts.
type Table []Info

// ReadTable reads this process's mounts from /proc/self/mountinfo.
func ReadTable() (Table, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	l, err := parseMountInfo(bytes.NewReader(b))
	return Table(l), err
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

// At returns the top mount at path (the last one listed, which hides
// the others), after resolving path.
func (t Table) At(path string) (Info, bool) {
	path = resolvePath(path)
	for i := len(t) - 1; i >= 0; i-- {
		if t[i].MountPoint == path {
			return t[i], true
		}
	}
	return Info{}, false
}

// ofDevice returns the mounts of the file system on device major:minor.
func (t Table) ofDevice(major, minor uint32) []Info {
	var l []Info
	for _, m := range t {
		if m.Major == major && m.Minor == minor {
			l = append(l, m)
		}
	}
	return l
}
