package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sysfs reads nbd device attributes under a sysfs mount point.
type sysfs string

// sysfsAt is the sysfs mounted at root, "" meaning /sys.
func sysfsAt(root string) sysfs {
	if root == "" {
		return "/sys"
	}
	return sysfs(root)
}

// nbdLoaded reports whether the nbd module is loaded (or built in).
func (s sysfs) nbdLoaded() (bool, error) {
	_, err := os.Stat(filepath.Join(string(s), "module", "nbd"))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

func (s sysfs) dev(index int, name string) string {
	return filepath.Join(string(s), "block", "nbd"+strconv.Itoa(index), name)
}

// backend reads /sys/block/nbdN/backend: the cookie, or "" when the file
// is absent (no cookie, or a kernel older than 5.14).
func (s sysfs) backend(index int) (string, error) {
	b, err := os.ReadFile(s.dev(index, "backend"))
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(s.dev(index, "")); err != nil {
			return "", fmt.Errorf("nbd%d: %w", index, err)
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("nbd%d: %w", index, err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// pid reads /sys/block/nbdN/pid: the task that started the device.
func (s sysfs) pid(index int) (int, error) {
	b, err := os.ReadFile(s.dev(index, "pid"))
	if err != nil {
		return 0, fmt.Errorf("nbd%d pid: %w", index, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("nbd%d pid: bad value %q", index, strings.TrimSpace(string(b)))
	}
	return n, nil
}

// devices lists the indexes of the nbd block devices in numeric order
// (the directory's order is lexical: nbd10 before nbd2).
func (s sysfs) devices() ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(string(s), "block"))
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	var l []int
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "nbd")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 {
			l = append(l, i)
		}
	}
	slices.Sort(l)
	return l, nil
}

func (s sysfs) findByCookie(cookie string) (int, error) {
	if cookie == "" {
		return 0, errors.New("find nbd device: empty cookie")
	}
	l, err := s.devices()
	if err != nil {
		return 0, err
	}
	for _, i := range l {
		c, err := s.backend(i)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			return 0, err
		}
		if c == cookie {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrNoSuchDevice, cookie)
}

// size reads /sys/block/nbdN/size (512-byte sectors) and returns bytes.
func (s sysfs) size(index int) (int64, error) {
	b, err := os.ReadFile(s.dev(index, "size"))
	if err != nil {
		return 0, fmt.Errorf("nbd%d size: %w", index, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 || n > 1<<54 {
		return 0, fmt.Errorf("nbd%d size: bad value %q", index, strings.TrimSpace(string(b)))
	}
	return n * 512, nil
}

// queues counts /sys/block/nbdN/mq/*: one hardware queue per connection.
func (s sysfs) queues(index int) (int, error) {
	ents, err := os.ReadDir(s.dev(index, "mq"))
	if err != nil {
		return 0, fmt.Errorf("nbd%d queues: %w", index, err)
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n, nil
}

// setIOTimeout sets /sys/block/nbdN/queue/io_timeout, the block layer's
// request timeout, in milliseconds.
func (s sysfs) setIOTimeout(index int, d time.Duration) error {
	ms := max(d.Milliseconds(), 1)
	if err := os.WriteFile(s.dev(index, "queue/io_timeout"), []byte(strconv.FormatInt(ms, 10)), 0); err != nil {
		return fmt.Errorf("nbd%d: io_timeout: %w", index, err)
	}
	return nil
}
