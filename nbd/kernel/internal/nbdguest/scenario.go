package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

const (
	cookie   = "pvc-guest-0001"
	diskFile = "/tmp/disk.img"
	mnt      = "/mnt"
	mib      = 1 << 20
	// fileConns is the number of connections of the file export that
	// carries ext4 (and that is killed, reattached, grown, handed over).
	fileConns = 4
)

// scenario holds what the steps share.
type scenario struct {
	start  time.Time
	client *kernel.Client
	*guestio.Report
}

func runScenario(ctx context.Context) error {
	s := &scenario{start: time.Now(), Report: guestio.NewReport()}
	err := s.run(ctx)
	if err == nil {
		// Request timeouts are not failures (a loaded host can starve the
		// emulated CPU), but they are worth seeing.
		timeouts := 0
		for _, l := range strings.Split(guestio.DmesgTail(1000), "\n") {
			if strings.Contains(l, "nbd") && strings.Contains(l, "timed out") {
				fmt.Println("    dmesg:", l)
				timeouts++
			}
		}
		s.Facts["kernel_request_timeouts"] = timeouts
	}
	return s.Finish(err)
}

func (s *scenario) run(ctx context.Context) error {
	if err := s.Step("load modules", func() error { return loadModules(ctx) }); err != nil {
		return err
	}
	if err := s.Step("open netlink client", func() error {
		var err error
		s.client, err = kernel.Open(ctx, kernel.ClientConfig{Trace: traceFirst(6)})
		if err != nil {
			return err
		}
		s.Facts["backend_identifier"] = s.client.BackendIdentifierSupported()
		if !s.client.BackendIdentifierSupported() {
			return errors.New("this kernel should know backend cookies")
		}
		l, err := s.client.Status(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("    status: %v\n", l)
		s.Facts["devices_at_load"] = len(l)
		return nil
	}); err != nil {
		return err
	}
	defer s.client.Close()
	if err := s.Step("memory backend in process", func() error { return s.memoryInProcess(ctx) }); err != nil {
		return err
	}
	if err := s.Step("ioctl interface (the fallback without netlink)", func() error { return s.ioctlInterface(ctx) }); err != nil {
		return err
	}
	if err := s.Step("read-only, no cookie, destroy on disconnect", func() error { return s.readOnlyDestroy(ctx) }); err != nil {
		return err
	}
	if err := s.Step("dropped connections replaced", func() error { return s.healDroppedConnections(ctx) }); err != nil {
		return err
	}
	return s.reattachScenario(ctx)
}

func loadModules(ctx context.Context) error {
	if err := kernel.LoadModule(ctx, kernel.ModuleConfig{NbdsMax: 4}); err != nil {
		return err
	}
	if err := kernel.LoadModule(ctx, kernel.ModuleConfig{NbdsMax: 4}); err != nil {
		return fmt.Errorf("second load: %w", err)
	}
	if b, err := os.ReadFile("/sys/module/nbd/parameters/nbds_max"); err != nil || strings.TrimSpace(string(b)) != "4" {
		return fmt.Errorf("nbds_max = %q, %v", b, err)
	}
	// ext4 and the crc32c its checksums need (the crypto API would ask
	// modprobe for it, and there is none here).
	return guestio.LoadModules("crc32c", "ext4")
}

// memoryInProcess attaches a Memory backend served by this very process
// over two connections, checks what the kernel made of it, does I/O
// through /dev/nbdN and detaches.
func (s *scenario) memoryInProcess(ctx context.Context) error {
	mem, err := nbd.NewMemory(32 * mib)
	if err != nil {
		return err
	}
	dev, err := kernel.Attach(ctx, kernel.AttachConfig{
		Backend: mem, BlockSize: 4096, Conns: 2, Cookie: "mem-0001",
		Index: kernel.AnyIndex, DeadConnTimeout: 10 * time.Second, Logger: logger("scenario"),
		Client: kernel.ClientConfig{Trace: traceFirst(6)},
	})
	if err != nil {
		return err
	}
	idx := dev.Index()
	fmt.Printf("    attached %s conns=%d\n", dev.Path(), dev.Conns())
	if err := expectSysfs(idx, map[string]string{
		"size": strconv.Itoa(32 * mib / 512), "backend": "mem-0001",
		"queue/logical_block_size": "4096", "ro": "0",
	}); err != nil {
		return err
	}
	if n, err := s.client.Connections(idx); err != nil || n != 2 {
		return fmt.Errorf("hardware queues %d, %v; want 2", n, err)
	}
	if st, ok, err := s.client.DeviceStatus(ctx, idx); err != nil || !ok || !st.Connected {
		return fmt.Errorf("status %+v %v %v", st, ok, err)
	}
	// A second attach with the same cookie is refused.
	_, err = kernel.Attach(ctx, kernel.AttachConfig{Backend: mem, BlockSize: 4096, Cookie: "mem-0001", Index: kernel.AnyIndex})
	if !errors.Is(err, kernel.ErrCookieInUse) {
		return fmt.Errorf("attach with a cookie in use: %v", err)
	}
	if err := s.directIOToBackend(ctx, dev, mem, "memory"); err != nil {
		return err
	}
	t := time.Now()
	if err := dev.Detach(ctx); err != nil {
		return err
	}
	if err := s.waitFree(ctx, idx); err != nil {
		return err
	}
	s.Timings["memory: detach until free"] = time.Since(t).Seconds()
	return nil
}

// readOnlyDestroy attaches a read-only export without a cookie that the
// kernel removes on disconnect.
func (s *scenario) readOnlyDestroy(ctx context.Context) error {
	mem, err := nbd.NewMemory(4 * mib)
	if err != nil {
		return err
	}
	dev, err := kernel.Attach(ctx, kernel.AttachConfig{
		Backend: mem, ReadOnly: true, DestroyOnDisconnect: true, Index: kernel.AnyIndex,
	})
	if err != nil {
		return err
	}
	idx := dev.Index()
	if dev.Reattachable() {
		return errors.New("a device without a cookie says it can be reattached")
	}
	if err := expectSysfs(idx, map[string]string{"ro": "1", "queue/logical_block_size": "512", "backend": ""}); err != nil {
		return err
	}
	f, err := os.OpenFile(dev.Path(), os.O_WRONLY, 0)
	if err == nil {
		_, err = f.Write(make([]byte, 4096))
		if err == nil {
			err = f.Sync()
		}
		f.Close()
	}
	if err == nil {
		return errors.New("a write to a read-only device succeeded")
	}
	fmt.Printf("    write refused: %v\n", err)
	if err := dev.Detach(ctx); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/sys/block/nbd%d", idx)); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nbd%d still exists after a disconnect with destroy-on-disconnect", idx)
		}
	}
}

// reattachScenario is the node plugin's life: a server process attaches
// a file on tmpfs, ext4 goes on it, the server is SIGKILLed with writes
// pending, a new process reattaches by cookie, the writes complete, the
// device grows online, a graceful handover follows, then disconnect.
func (s *scenario) reattachScenario(ctx context.Context) error {
	if err := os.WriteFile(diskFile, nil, 0o600); err != nil {
		return err
	}
	if err := os.Truncate(diskFile, 64*mib); err != nil {
		return err
	}
	var srv *guestio.Child
	var idx int
	if err := s.Step(fmt.Sprintf("attach (server process, %d conns)", fileConns), func() error {
		var err error
		srv, err = guestio.StartChild("serve", "serve", "-file", diskFile, "-cookie", cookie, "-conns", strconv.Itoa(fileConns), "-dead", "60s", "-timeout", "10s")
		if err != nil {
			return err
		}
		f, err := srv.Expect(ctx, "ready")
		if err != nil {
			return err
		}
		idx, _ = strconv.Atoi(f[1])
		if f[2] != strconv.Itoa(fileConns) {
			return fmt.Errorf("server says %s connections, want %d", f[2], fileConns)
		}
		if err := s.checkConns(idx); err != nil {
			return err
		}
		return expectSysfs(idx, map[string]string{"backend": cookie, "size": strconv.Itoa(64 * mib / 512)})
	}); err != nil {
		return err
	}
	dev := "/dev/nbd" + strconv.Itoa(idx)
	s.Facts["device"] = dev

	if err := s.Step("mkfs.ext4", func() error {
		return run("/sbin/mke2fs", "-q", "-t", "ext4", "-F", dev)
	}); err != nil {
		return err
	}
	var sumA string
	if err := s.Step("mount + write 8 MiB + sync", func() error {
		if err := unix.Mount(dev, mnt, "ext4", 0, ""); err != nil {
			return fmt.Errorf("mount: %w", err)
		}
		var err error
		sumA, err = guestio.WriteRandomFile(mnt+"/A", 8*mib)
		unix.Sync()
		return err
	}); err != nil {
		return err
	}

	// Kill the server while a writer keeps fdatasync'd writes in flight.
	writer := startStreamWriter(mnt + "/B")
	if !writer.WaitProgress(4, 30*time.Second) {
		return errors.New("the writer does not progress")
	}
	killed := time.Now()
	srv.Kill()
	fmt.Printf("### [%6.2fs] server SIGKILLed with writes in flight\n", guestio.Uptime())
	if c, err := s.client.Cookie(idx); err != nil || c != cookie {
		return fmt.Errorf("cookie after the kill: %q %v", c, err)
	}
	if err := s.Step("I/O blocked while no server", func() error {
		time.Sleep(500 * time.Millisecond)
		before := writer.Synced()
		if writer.WaitProgress(2, 1500*time.Millisecond) {
			return fmt.Errorf("the writer synced %d chunks with no server", writer.Synced()-before)
		}
		return nil
	}); err != nil {
		return err
	}

	if err := s.Step("reattach refusals", func() error { return s.refusals(ctx, idx) }); err != nil {
		return err
	}

	var srv2 *guestio.Child
	var reattached time.Time
	if err := s.Step("reattach (new process, same cookie)", func() error {
		var err error
		srv2, err = guestio.StartChild("reattach", "reattach", "-file", diskFile, "-cookie", cookie, "-dead", "60s", "-timeout", "10s")
		if err != nil {
			return err
		}
		f, err := srv2.Expect(ctx, "ready")
		if err != nil {
			return err
		}
		reattached = time.Now()
		if f[1] != strconv.Itoa(idx) || f[2] != strconv.Itoa(fileConns) {
			return fmt.Errorf("reattached %v, want index %d with %d connections", f[1:], idx, fileConns)
		}
		return s.checkConns(idx)
	}); err != nil {
		return err
	}
	s.Timings["kill to reattached"] = reattached.Sub(killed).Seconds()

	var sumB string
	if err := s.Step("blocked writes resume", func() error {
		if !writer.WaitProgress(4, 90*time.Second) {
			return errors.New("the writer is still blocked")
		}
		s.Timings["reattached to writes resumed"] = time.Since(reattached).Seconds()
		r := writer.Finish()
		if r.Err != nil {
			return r.Err
		}
		sumB = r.Sum
		s.Facts["writer_bytes"] = r.Bytes
		return nil
	}); err != nil {
		return err
	}

	if err := s.Step("another server cannot steal a live device", func() error {
		f, err := nbd.OpenFile(diskFile, true)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = kernel.Reattach(ctx, kernel.AttachConfig{Backend: f, Cookie: cookie, ReadOnly: true})
		if !errors.Is(err, kernel.ErrNoDeadConnection) {
			return fmt.Errorf("want ErrNoDeadConnection, got %v", err)
		}
		return nil
	}); err != nil {
		return err
	}

	if err := s.Step("verify after remount", func() error {
		if err := guestio.CheckSum(mnt+"/A", sumA); err != nil {
			return err
		}
		if err := guestio.CheckSum(mnt+"/B", sumB); err != nil {
			return err
		}
		if err := remount(dev); err != nil {
			return err
		}
		if err := guestio.CheckSum(mnt+"/A", sumA); err != nil {
			return err
		}
		return guestio.CheckSum(mnt+"/B", sumB)
	}); err != nil {
		return err
	}

	if err := s.Step("fstrim reaches the backend as TRIM", func() error {
		return s.fstrim(ctx, srv2, dev, sumA, sumB)
	}); err != nil {
		return err
	}

	if err := s.Step("online grow to 128 MiB + resize2fs", func() error {
		var before unix.Statfs_t
		unix.Statfs(mnt, &before)
		if err := srv2.Send(fmt.Sprint("resize ", 128*mib)); err != nil {
			return err
		}
		if _, err := srv2.Expect(ctx, "resized"); err != nil {
			return err
		}
		if err := expectSysfs(idx, map[string]string{"size": strconv.Itoa(128 * mib / 512)}); err != nil {
			return err
		}
		os.Symlink("/proc/mounts", "/etc/mtab")
		if err := run("/sbin/resize2fs", dev); err != nil {
			return err
		}
		var after unix.Statfs_t
		unix.Statfs(mnt, &after)
		s.Facts["fs_blocks_before_after"] = []uint64{before.Blocks, after.Blocks}
		if after.Blocks <= before.Blocks*3/2 {
			return fmt.Errorf("file system blocks %d -> %d", before.Blocks, after.Blocks)
		}
		return guestio.CheckSum(mnt+"/A", sumA)
	}); err != nil {
		return err
	}

	var srv3 *guestio.Child
	if err := s.Step("graceful handover under writes (release + reattach)", func() error {
		writer := startStreamWriter(mnt + "/C")
		if !writer.WaitProgress(4, 30*time.Second) {
			return errors.New("the writer does not progress")
		}
		released := time.Now()
		if err := srv2.Send("release"); err != nil {
			return err
		}
		if _, err := srv2.Expect(ctx, "released"); err != nil {
			return err
		}
		if err := srv2.Wait(); err != nil {
			return err
		}
		var err error
		srv3, err = guestio.StartChild("reattach2", "reattach", "-file", diskFile, "-cookie", cookie, "-dead", "60s", "-timeout", "10s")
		if err != nil {
			return err
		}
		if _, err := srv3.Expect(ctx, "ready"); err != nil {
			return err
		}
		if !writer.WaitProgress(4, 90*time.Second) {
			return errors.New("the writer is still blocked after the handover")
		}
		s.Timings["handover: release to writes resumed"] = time.Since(released).Seconds()
		r := writer.Finish()
		if r.Err != nil {
			return r.Err
		}
		return guestio.CheckSum(mnt+"/C", r.Sum)
	}); err != nil {
		return err
	}

	return s.Step("unmount + detach until free", func() error {
		if err := unix.Unmount(mnt, 0); err != nil {
			return err
		}
		if err := srv3.Send("detach"); err != nil {
			return err
		}
		if _, err := srv3.Expect(ctx, "detached"); err != nil {
			return err
		}
		if err := srv3.Wait(); err != nil {
			return err
		}
		if err := s.waitFree(ctx, idx); err != nil {
			return err
		}
		if c, _ := s.client.Cookie(idx); c != "" {
			return fmt.Errorf("cookie %q still on the free device", c)
		}
		free, err := s.client.FreeDevice(ctx)
		if err != nil {
			return err
		}
		if free == kernel.AnyIndex || free > idx {
			return fmt.Errorf("free device %d, want %d or lower", free, idx)
		}
		return nil
	})
}

// checkConns checks that the kernel runs the device with fileConns
// connections: one hardware queue per socket (/sys/block/nbdX/mq).
func (s *scenario) checkConns(idx int) error {
	n, err := s.client.Connections(idx)
	if err != nil {
		return err
	}
	fmt.Printf("    nbd%d: kernel reports %d connections (hardware queues)\n", idx, n)
	if n != fileConns {
		return fmt.Errorf("nbd%d has %d connections, want %d", idx, n, fileConns)
	}
	s.Facts["file_export_conns"] = n
	return nil
}

// fstrim writes and deletes a file, runs FITRIM on the mounted file
// system and checks that TRIM requests reached the serving process's
// backend and that the backing file lost the file's blocks (the file
// backend punches holes); then that the live files survived, read back
// after a remount with cold caches.
func (s *scenario) fstrim(ctx context.Context, srv *guestio.Child, dev, sumA, sumB string) error {
	if _, err := guestio.WriteRandomFile(mnt+"/D", 8*mib); err != nil {
		return err
	}
	if err := os.Remove(mnt + "/D"); err != nil {
		return err
	}
	unix.Sync()
	trims0, bytes0, err := trimStats(ctx, srv)
	if err != nil {
		return err
	}
	blocks0, err := allocated(diskFile)
	if err != nil {
		return err
	}
	t := time.Now()
	trimmed, err := fitrim(mnt)
	if err != nil {
		return err
	}
	s.Timings["fstrim (FITRIM ioctl)"] = time.Since(t).Seconds()
	trims1, bytes1, err := trimStats(ctx, srv)
	if err != nil {
		return err
	}
	blocks1, err := allocated(diskFile)
	if err != nil {
		return err
	}
	fmt.Printf("    fstrim: ext4 trimmed %d bytes; backend got %d TRIM requests (%d bytes); backing file allocated %d -> %d bytes\n",
		trimmed, trims1-trims0, bytes1-bytes0, blocks0, blocks1)
	s.Facts["fstrim_backend_trims"] = trims1 - trims0
	s.Facts["fstrim_backend_trim_bytes"] = bytes1 - bytes0
	s.Facts["fstrim_backing_allocated_before_after"] = []int64{blocks0, blocks1}
	if trims1 <= trims0 {
		return errors.New("fstrim sent no TRIM to the backend")
	}
	if bytes1-bytes0 < 8*mib {
		return fmt.Errorf("the backend got TRIMs for %d bytes, less than the deleted 8 MiB file", bytes1-bytes0)
	}
	if blocks0-blocks1 < 6*mib {
		return fmt.Errorf("backing file allocation %d -> %d: the deleted file's blocks are still there", blocks0, blocks1)
	}
	if err := guestio.CheckSum(mnt+"/A", sumA); err != nil {
		return err
	}
	if err := guestio.CheckSum(mnt+"/B", sumB); err != nil {
		return err
	}
	if err := remount(dev); err != nil {
		return err
	}
	if err := guestio.CheckSum(mnt+"/A", sumA); err != nil {
		return err
	}
	return guestio.CheckSum(mnt+"/B", sumB)
}

// trimStats asks a server process for its backend's TRIM counters.
func trimStats(ctx context.Context, srv *guestio.Child) (n, bytes int64, err error) {
	if err := srv.Send("stats"); err != nil {
		return 0, 0, err
	}
	f, err := srv.Expect(ctx, "stats")
	if err != nil {
		return 0, 0, err
	}
	if len(f) != 3 {
		return 0, 0, fmt.Errorf("stats line %v", f)
	}
	n, err = strconv.ParseInt(f[1], 10, 64)
	if err == nil {
		bytes, err = strconv.ParseInt(f[2], 10, 64)
	}
	return n, bytes, err
}

// allocated is the bytes a file occupies (st_blocks).
func allocated(path string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Blocks * 512, nil
}

// fitrim is fstrim(8): FITRIM on the whole file system mounted at dir;
// it returns the bytes the file system says it trimmed.
func fitrim(dir string) (uint64, error) {
	const fitrimIoctl = 0xc0185879 // _IOWR('X', 121, struct fstrim_range)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	r := struct{ start, len, minlen uint64 }{0, ^uint64(0), 0}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fitrimIoctl, uintptr(unsafe.Pointer(&r))); errno != 0 {
		return 0, fmt.Errorf("FITRIM %s: %w", dir, errno)
	}
	return r.len, nil
}

// remount unmounts mnt, drops the page cache and mounts dev again, so
// what is read next comes from the backend.
func remount(dev string) error {
	if err := unix.Unmount(mnt, 0); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return err
	}
	return unix.Mount(dev, mnt, "ext4", 0, "")
}

// refusals checks that a reattach with a wrong cookie fails, both in this
// package (no such device) and in the kernel (EINVAL on a mismatch).
func (s *scenario) refusals(ctx context.Context, idx int) error {
	mem, _ := nbd.NewMemory(64 * mib)
	_, err := kernel.Reattach(ctx, kernel.AttachConfig{Backend: mem, Cookie: "wrong-cookie"})
	if !errors.Is(err, kernel.ErrNoSuchDevice) {
		return fmt.Errorf("reattach with an unknown cookie: %v", err)
	}
	err = s.client.Reconfigure(ctx, kernel.ReconfigureRequest{Index: idx, BackendIdentifier: "wrong-cookie"})
	if !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("kernel RECONFIGURE with a wrong cookie: %v", err)
	}
	fmt.Printf("    kernel refused a wrong cookie: %v\n", err)
	return nil
}

// waitFree polls STATUS until the device is no longer configured.
func (s *scenario) waitFree(ctx context.Context, idx int) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, ok, err := s.client.DeviceStatus(ctx, idx)
		if err != nil {
			return err
		}
		if !ok || !st.Connected {
			size, _ := s.client.DeviceSize(idx)
			if size != 0 {
				return fmt.Errorf("nbd%d free but size %d", idx, size)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nbd%d still connected", idx)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func expectSysfs(idx int, want map[string]string) error {
	for k, v := range want {
		b, err := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/%s", idx, k))
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(b)); got != v {
			return fmt.Errorf("/sys/block/nbd%d/%s = %q, want %q", idx, k, got, v)
		}
	}
	return nil
}

func run(prog string, args ...string) error {
	out, err := exec.Command(prog, args...).CombinedOutput()
	if len(out) > 0 {
		fmt.Printf("    %s: %s\n", prog, strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "\n    "))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", prog, err)
	}
	return nil
}

// traceFirst prints the first n netlink datagrams in hex: real kernel
// bytes for the decoders' test vectors.
func traceFirst(n int) func(bool, []byte) {
	count := 0
	return func(sent bool, b []byte) {
		if count >= n {
			return
		}
		count++
		dir := "rx"
		if sent {
			dir = "tx"
		}
		fmt.Printf("NETLINK %s %s\n", dir, hex.EncodeToString(b))
	}
}

// directIOToBackend writes 8 MiB of random bytes at 4 MiB through the
// device with O_DIRECT and reads them back, then finds the same bytes
// straight in the backend; the time is recorded under label.
func (s *scenario) directIOToBackend(ctx context.Context, dev *kernel.Device, mem *nbd.Memory, label string) error {
	t := time.Now()
	data := make([]byte, 8*mib)
	rand.Read(data)
	if err := guestio.DirectIO(dev.Path(), data, 4*mib); err != nil {
		return err
	}
	s.Timings[label+": 8 MiB O_DIRECT write+read"] = time.Since(t).Seconds()
	back := make([]byte, len(data))
	if _, err := mem.ReadAt(ctx, back, 4*mib); err != nil {
		return err
	}
	if sha256.Sum256(back) != sha256.Sum256(data) {
		return errors.New("backend holds other bytes than written through /dev/nbd")
	}
	return nil
}
