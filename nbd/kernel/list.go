package kernel

import (
	"errors"
	"fmt"
	"io/fs"
)

// Mapped is an nbd device the kernel runs, as List reports it.
type Mapped struct {
	Index int
	// Size is the device's size in bytes.
	Size int64
	// Connections counts the device's hardware queues: one per
	// connection it was attached with.
	Connections int
	// Cookie is the backend identifier given at attach; empty when there
	// was none, which is always the case through the ioctl interface
	// and on kernels before 5.14.
	Cookie string
	// PID is the kernel's pid attribute: the task that started the
	// device (a thread of its server, whose /proc entry names the
	// process). A server that took the device over after another died
	// leaves it naming the first.
	PID int
}

// Path is the device node, /dev/nbdN.
func (m Mapped) Path() string { return devPath(m.Index) }

// List lists the nbd devices the kernel runs, through either interface,
// in index order, from sysfs mounted at sysfsRoot ("" means /sys): the
// devices with a pid attribute, which the kernel makes when it starts a
// device and removes when it frees it. It needs no netlink family, so it
// works on kernels that have only the ioctl interface, and it does not
// count a device that merely is open: netlink STATUS reports a device
// "connected" while its configuration has a reference, and opening an
// unconfigured /dev/nbdN (as udev's probes do) makes one (nbd_open in
// drivers/block/nbd.c). A kernel without nbd loaded has none.
func List(sysfsRoot string) ([]Mapped, error) {
	sys := sysfsAt(sysfsRoot)
	loaded, err := sys.nbdLoaded()
	if err != nil {
		return nil, fmt.Errorf("list nbd devices: %w", err)
	}
	if !loaded {
		return nil, nil
	}
	idx, err := sys.devicesRunning(true)
	if err != nil {
		return nil, err
	}
	var l []Mapped
	for _, i := range idx {
		m, err := sys.mapped(i)
		if errors.Is(err, fs.ErrNotExist) {
			continue // freed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("list nbd devices: %w", err)
		}
		l = append(l, m)
	}
	return l, nil
}

// mapped reads the attributes of running device index.
func (s sysfs) mapped(index int) (m Mapped, err error) {
	m.Index = index
	if m.Size, err = s.size(index); err != nil {
		return m, err
	}
	if m.Connections, err = s.queues(index); err != nil {
		return m, err
	}
	if m.Cookie, err = s.backend(index); err != nil {
		return m, err
	}
	m.PID, err = s.pid(index)
	return m, err
}
