package guestbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// device is a block device under test and whoever serves it.
type device interface {
	Path() string
	// PID is the serving process, 0 when the kernel serves (krbd).
	PID() int
	Close(ctx context.Context) error
}

// mappedDevice is /dev/nbdN (or /dev/ublkbN) served by a `purerbd nbd
// map` (`purerbd device map`) child.
type mappedDevice struct {
	dev string
	c   *child
}

func (m *mappedDevice) Path() string { return m.dev }
func (m *mappedDevice) PID() int     { return m.c.cmd.Process.Pid }

// Close stops the map process, which unmaps the device on SIGTERM.
func (m *mappedDevice) Close(context.Context) error { return m.c.stop() }

// purerbdMapEnv runs `purerbd nbd map ARGS...`, with env added to its
// environment, and waits for the /dev/nbdN it prints.
func purerbdMapEnv(ctx context.Context, env []string, bin string, args ...string) (*mappedDevice, error) {
	c, err := startChildEnv(env, bin, append([]string{"nbd", "map"}, args...)...)
	if err != nil {
		return nil, err
	}
	l, err := c.line(ctx, 2*time.Minute)
	if err != nil {
		_ = c.stop()
		return nil, fmt.Errorf("purerbd nbd map: %w", err)
	}
	if !strings.HasPrefix(l, "/dev/nbd") {
		_ = c.stop()
		return nil, fmt.Errorf("purerbd nbd map printed %q", l)
	}
	return &mappedDevice{dev: l, c: c}, nil
}

// purerbdDeviceMap runs `purerbd device map ARGS...` (-t ublk), with env
// added to its environment, and waits for the /dev/ublkbN it prints.
func purerbdDeviceMap(ctx context.Context, bin string, env []string, args ...string) (*mappedDevice, error) {
	c, err := startChildEnv(env, bin, append([]string{"device", "map"}, args...)...)
	if err != nil {
		return nil, err
	}
	l, err := c.line(ctx, 2*time.Minute)
	if err != nil {
		_ = c.stop()
		return nil, fmt.Errorf("purerbd device map: %w", err)
	}
	if !strings.HasPrefix(l, "/dev/ublkb") {
		_ = c.stop()
		return nil, fmt.Errorf("purerbd device map printed %q", l)
	}
	return &mappedDevice{dev: l, c: c}, nil
}

// nbdkitDevice is /dev/nbdN attached by this program to an nbdkit
// server's Unix socket, after the NBD handshake: what nbd-client does.
type nbdkitDevice struct {
	c      *child
	client *kernel.Client
	index  int
}

func (n *nbdkitDevice) Path() string { return fmt.Sprintf("/dev/nbd%d", n.index) }
func (n *nbdkitDevice) PID() int     { return n.c.cmd.Process.Pid }

func (n *nbdkitDevice) Close(ctx context.Context) error {
	err := n.client.Disconnect(ctx, n.index)
	n.client.Close()
	return errors.Join(err, n.c.stop())
}

// nbdkitMemory starts `nbdkit memory SIZE` on a Unix socket and attaches
// it to a kernel device over one connection.
func nbdkitMemory(ctx context.Context, bin string, size string) (*nbdkitDevice, error) {
	sock := "/run/nbdkit.sock"
	os.Remove(sock)
	c, err := startChild(bin, "-f", "-U", sock, "memory", size)
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	for i := 0; ; i++ {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if i > 300 {
			_ = c.stop()
			return nil, fmt.Errorf("nbdkit did not listen on %s: %w", sock, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d, err := attachNBD(ctx, conn)
	if err != nil {
		conn.Close()
		_ = c.stop()
		return nil, err
	}
	d.c = c
	return d, nil
}

// NBD handshake constants (fixed newstyle).
const (
	nbdMagic        = 0x4e42444d41474943 // "NBDMAGIC"
	nbdOptMagic     = 0x49484156454f5054 // "IHAVEOPT"
	flagFixed       = 1 << 0
	flagNoZeroes    = 1 << 1
	optExportName   = 1
	exportNameZeros = 124
)

// attachNBD does the client side of the handshake on conn and hands the
// socket to the kernel.
func attachNBD(ctx context.Context, conn net.Conn) (*nbdkitDevice, error) {
	size, tflags, err := handshake(conn)
	if err != nil {
		return nil, err
	}
	f, err := conn.(*net.UnixConn).File()
	conn.Close()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := kernel.LoadModule(ctx, kernel.ModuleConfig{IgnoreStatus: true}); err != nil {
		return nil, err
	}
	client, err := kernel.Open(ctx, kernel.ClientConfig{})
	if err != nil {
		return nil, err
	}
	idx, err := client.Connect(ctx, kernel.ConnectRequest{
		Index: kernel.AnyIndex, Size: size, BlockSize: 512,
		ServerFlags: kernel.ServerFlags(tflags), Sockets: []int{int(f.Fd())},
	})
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("nbd connect: %w", err)
	}
	d := &nbdkitDevice{client: client, index: idx}
	if err := waitDevice(ctx, d.Path()); err != nil {
		_ = d.client.Disconnect(ctx, idx)
		client.Close()
		return nil, err
	}
	return d, nil
}

// waitDevice waits until path opens.
func waitDevice(ctx context.Context, path string) error {
	for i := 0; ; i++ {
		f, err := os.Open(path)
		if err == nil {
			f.Close()
			return nil
		}
		if i > 250 || ctx.Err() != nil {
			return fmt.Errorf("%s did not appear: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// krbdDevice is /dev/rbdN mapped by the kernel's rbd driver.
type krbdDevice struct{ id string }

func (k *krbdDevice) Path() string { return "/dev/rbd" + k.id }
func (k *krbdDevice) PID() int     { return 0 }

func (k *krbdDevice) Close(context.Context) error {
	return os.WriteFile("/sys/bus/rbd/remove_single_major", []byte(k.id), 0o200)
}

// krbdMap maps pool/image with rbd.ko (libceph's own msgr2 and cephx).
// The key goes to sysfs, never to the console.
func krbdMap(ctx context.Context, mon, user, key, pool, image string) (*krbdDevice, error) {
	if err := guestio.LoadModules("rbd"); err != nil {
		return nil, fmt.Errorf("load rbd.ko: %w", err)
	}
	before, _ := filepath.Glob("/sys/bus/rbd/devices/*")
	spec := fmt.Sprintf("%s name=%s,secret=%s,ms_mode=prefer-crc %s %s -", mon, user, key, pool, image)
	if err := os.WriteFile("/sys/bus/rbd/add_single_major", []byte(spec), 0o200); err != nil {
		return nil, fmt.Errorf("map %s/%s with rbd.ko: %w", pool, image, err)
	}
	after, _ := filepath.Glob("/sys/bus/rbd/devices/*")
	var id string
	for _, a := range after {
		if !contains(before, a) {
			id = filepath.Base(a)
		}
	}
	if id == "" {
		return nil, errors.New("rbd.ko mapped no new device")
	}
	d := &krbdDevice{id: id}
	return d, waitDevice(ctx, d.Path())
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// handshake is the client side of the fixed newstyle NBD handshake for
// the default export (NBD_OPT_EXPORT_NAME with an empty name): it returns
// the export's size and transmission flags, conn then being in the
// transmission phase.
func handshake(conn net.Conn) (size uint64, flags uint16, err error) {
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	defer conn.SetDeadline(time.Time{})
	var hello [18]byte
	if _, err := io.ReadFull(conn, hello[:]); err != nil {
		return 0, 0, fmt.Errorf("nbd handshake: %w", err)
	}
	if binary.BigEndian.Uint64(hello[0:]) != nbdMagic || binary.BigEndian.Uint64(hello[8:]) != nbdOptMagic {
		return 0, 0, fmt.Errorf("nbd handshake: not a newstyle server: % x", hello)
	}
	sflags := binary.BigEndian.Uint16(hello[16:])
	if sflags&flagFixed == 0 {
		return 0, 0, errors.New("nbd handshake: the server is not fixed newstyle")
	}
	cflags := uint32(flagFixed)
	if sflags&flagNoZeroes != 0 {
		cflags |= flagNoZeroes
	}
	var req [4 + 16]byte
	binary.BigEndian.PutUint32(req[0:], cflags)
	binary.BigEndian.PutUint64(req[4:], nbdOptMagic)
	binary.BigEndian.PutUint32(req[12:], optExportName)
	binary.BigEndian.PutUint32(req[16:], 0) // empty name
	if _, err := conn.Write(req[:]); err != nil {
		return 0, 0, fmt.Errorf("nbd handshake: %w", err)
	}
	n := 10
	if cflags&flagNoZeroes == 0 {
		n += exportNameZeros
	}
	rep := make([]byte, n)
	if _, err := io.ReadFull(conn, rep); err != nil {
		return 0, 0, fmt.Errorf("nbd handshake: export: %w", err)
	}
	return binary.BigEndian.Uint64(rep[0:]), binary.BigEndian.Uint16(rep[8:]), nil
}
