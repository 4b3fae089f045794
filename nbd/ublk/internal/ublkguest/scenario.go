package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
	"github.com/purerbd/purerbd/nbd/ublk"
)

const mib = 1 << 20

type scenario struct {
	*guestio.Report
}

func newScenario() *scenario {
	s := &scenario{Report: guestio.NewReport()}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		s.Facts["kernel"] = unix.ByteSliceToString(uts.Release[:])
	}
	return s
}

// runAbsent checks, on a kernel without ublk, that loading it fails
// with ublk.ErrUnsupported, and so does opening the control device.
func runAbsent(ctx context.Context) error {
	s := newScenario()
	return s.Finish(s.Step("ublk reported absent", func() error {
		err := ublk.LoadModule(ctx, ublk.ModuleConfig{IgnoreStatus: true})
		if !errors.Is(err, ublk.ErrUnsupported) {
			return fmt.Errorf("LoadModule: %v, want ErrUnsupported", err)
		}
		s.Facts["load_module"] = err.Error()
		_, err = ublk.OpenControl(ctx)
		if !errors.Is(err, ublk.ErrUnsupported) {
			return fmt.Errorf("OpenControl: %v, want ErrUnsupported", err)
		}
		s.Facts["open_control"] = err.Error()
		return nil
	}))
}

func runScenario(ctx context.Context) error {
	s := newScenario()
	return s.Finish(s.run(ctx))
}

func (s *scenario) run(ctx context.Context) error {
	var features uint64
	if err := s.Step("load ublk_drv", func() error { return s.loadModule(ctx) }); err != nil {
		return err
	}
	if err := s.Step("control features", func() error {
		c, err := ublk.OpenControl(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		features = c.Features()
		s.Facts["features"] = fmt.Sprintf("%#x", features)
		return nil
	}); err != nil {
		return err
	}
	var dev *ublk.Device
	mem, err := nbd.NewMemory(64 * mib)
	if err != nil {
		return err
	}
	if err := s.Step("serve memory backend", func() error {
		dev, err = serve(ctx, ublk.Config{Backend: mem, Queues: 2, Logger: logger("inproc"), Tag: guestTag})
		if err != nil {
			return err
		}
		s.Facts["device_flags"] = fmt.Sprintf("%#x", dev.Info().Flags)
		// user copy wherever the kernel offers it
		if features&ublk.FlagUserCopy != 0 && dev.Info().Flags&ublk.FlagUserCopy == 0 {
			return fmt.Errorf("the kernel offers user copy (features %#x), the device has flags %#x", features, dev.Info().Flags)
		}
		// and batch I/O wherever it offers that too
		if features&ublk.FlagBatchIO != 0 && dev.Info().Flags&ublk.FlagBatchIO == 0 {
			return fmt.Errorf("the kernel offers batch I/O (features %#x), the device has flags %#x", features, dev.Info().Flags)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.Step("O_DIRECT write and read", func() error { return directChecks(ctx, dev.Path(), mem) }); err != nil {
		return err
	}
	if err := s.Step("O_DIRECT write and read with per-tag buffers (NoUserCopy)", func() error {
		return optionCheck(ctx, ublk.Config{NoUserCopy: true, Logger: logger("inproc-buffers")}, "NoUserCopy", ublk.FlagUserCopy)
	}); err != nil {
		return err
	}
	if features&ublk.FlagBatchIO != 0 {
		if err := s.Step("O_DIRECT write and read, one request per command (NoBatchIO)", func() error {
			return optionCheck(ctx, ublk.Config{Queues: 2, NoBatchIO: true, Logger: logger("inproc-single")}, "NoBatchIO", ublk.FlagBatchIO)
		}); err != nil {
			return err
		}
	}
	if err := s.Step("discard and write zeroes", func() error { return discardChecks(ctx, dev.Path(), mem) }); err != nil {
		return err
	}
	if err := s.Step("recovery of a live device refused", func() error { return busyCheck(ctx, dev.ID()) }); err != nil {
		return err
	}
	if err := s.Step("the kernel keeps the tag: Find", func() error { return findCheck(ctx, dev) }); err != nil {
		return err
	}
	if err := s.Step("resize a live device (UPDATE_SIZE where the kernel has it)", func() error {
		return s.resizeCheck(ctx, dev, features)
	}); err != nil {
		return err
	}
	if err := s.Step("throughput over ublk", func() error {
		r, err := measure(dev.Path(), 48*mib)
		s.Facts["ublk"] = r
		return err
	}); err != nil {
		return err
	}
	if err := s.Step("the device's counters", func() error {
		st := dev.Stats()
		s.Facts["ublk_stats"] = st
		return statsCheck(st, 6)
	}); err != nil {
		return err
	}
	if err := s.Step("ext4 on ublk", func() error { return ext4Check(dev.Path()) }); err != nil {
		return err
	}
	if err := s.Step("stop and delete", func() error { return stopDelete(ctx, dev) }); err != nil {
		return err
	}
	if err := s.Step("throughput over nbd.ko", func() error {
		r, err := nbdMeasure(ctx)
		s.Facts["nbd"] = r
		return err
	}); err != nil {
		return err
	}
	if u, n := s.Facts["ublk"].(result), s.Facts["nbd"].(result); n.WriteMiBs > 0 && n.ReadMiBs > 0 && n.RandReadIOPS > 0 {
		s.Facts["ratio_ublk_over_nbd"] = map[string]float64{
			"seq_write":     u.WriteMiBs / n.WriteMiBs,
			"seq_read":      u.ReadMiBs / n.ReadMiBs,
			"rand_read_4k":  u.RandReadIOPS / n.RandReadIOPS,
			"rand_write_4k": u.RandWriteIOPS / n.RandWriteIOPS,
		}
	}
	return s.Step("SIGKILL under writers and recovery", func() error { return s.killRecover(ctx) })
}

func (s *scenario) loadModule(ctx context.Context) error {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	if err := ublk.LoadModule(ctx, ublk.ModuleConfig{IgnoreStatus: true, Logger: log}); err != nil {
		return err
	}
	var rec struct{ File string }
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec); err != nil {
		return fmt.Errorf("LoadModule loaded no module file (log %q): %w", buf.String(), err)
	}
	s.Facts["module_file"] = path.Base(rec.File)
	return nil
}

// directChecks writes random data with O_DIRECT at the start and the end
// of the device, reads it back the same way, and checks that the
// backend holds it too.
func directChecks(ctx context.Context, dev string, mem *nbd.Memory) error {
	for _, off := range []int64{0, 17 * mib, mem.Size() - mib} {
		data := make([]byte, mib)
		rand.Read(data)
		if err := guestio.DirectIO(dev, data, off); err != nil {
			return fmt.Errorf("at %d: %w", off, err)
		}
		got := make([]byte, len(data))
		if _, err := mem.ReadAt(ctx, got, off); err != nil {
			return err
		}
		if !bytes.Equal(got, data) {
			return fmt.Errorf("the backend does not hold what was written at %d", off)
		}
	}
	// past the end: the kernel refuses it before the server sees it
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	if n, _ := f.ReadAt(buf, mem.Size()); n != 0 {
		return fmt.Errorf("read %d bytes past the end", n)
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
	}
	return nil
}

// ext4Check makes an ext4 file system on dev, writes a file, and reads
// it back after a remount.
func ext4Check(dev string) error {
	if err := guestio.LoadModules("crc32c", "ext4"); err != nil {
		return err
	}
	if err := run("/sbin/mke2fs", "-q", "-t", "ext4", "-F", dev); err != nil {
		return err
	}
	const mnt = "/mnt"
	if err := unix.Mount(dev, mnt, "ext4", 0, ""); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	sum, err := guestio.WriteRandomFile(mnt+"/data", 8*mib)
	if err != nil {
		unix.Unmount(mnt, 0)
		return err
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		return fmt.Errorf("umount: %w", err)
	}
	if err := unix.Mount(dev, mnt, "ext4", unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mount again: %w", err)
	}
	defer unix.Unmount(mnt, 0)
	return guestio.CheckSum(mnt+"/data", sum)
}

// stopDelete stops and deletes dev and checks that its nodes are gone.
func stopDelete(ctx context.Context, dev *ublk.Device) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := dev.Stop(sctx); err != nil {
		return err
	}
	for _, p := range []string{fmt.Sprintf("/sys/block/ublkb%d", dev.ID()), fmt.Sprintf("/sys/class/ublk-char/ublkc%d", dev.ID())} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s still there after DEL_DEV (%v)", p, err)
		}
	}
	c, err := ublk.OpenControl(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.DevInfo(ctx, dev.ID()); !errors.Is(err, ublk.ErrNoDevice) {
		return fmt.Errorf("GET_DEV_INFO of the deleted device: %v, want ErrNoDevice", err)
	}
	return nil
}

// nbdMeasure attaches a Memory backend of the same size through nbd.ko
// (two connections, as the ublk device has two queues) and measures it
// the same way.
func nbdMeasure(ctx context.Context) (result, error) {
	if err := kernel.LoadModule(ctx, kernel.ModuleConfig{NbdsMax: 2, IgnoreStatus: true}); err != nil {
		return result{}, err
	}
	mem, err := nbd.NewMemory(64 * mib)
	if err != nil {
		return result{}, err
	}
	dev, err := kernel.Attach(ctx, kernel.AttachConfig{Backend: mem, BlockSize: 4096, Conns: 2, Index: kernel.AnyIndex, Logger: logger("nbd")})
	if err != nil {
		return result{}, err
	}
	r, merr := measure(dev.Path(), 48*mib)
	if err := dev.Detach(ctx); err != nil && merr == nil {
		merr = err
	}
	return r, merr
}

// killCycles is how many times killRecover kills the server.
const killCycles = 5

// killRecover serves a file backend from a child process and, killCycles
// times, keeps four O_DIRECT writers busy on the device, SIGKILLs the
// serving process and lets a new one recover the device: no write may
// fail, and every block must hold the last write that completed there,
// on the device after each cycle and in the file at the end. The longest
// wait of any one write in a cycle is the stall the application saw.
func (s *scenario) killRecover(ctx context.Context) error {
	const file = "/tmp/ublk-backing"
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		return err
	}
	if err := os.Truncate(file, 64*mib); err != nil {
		return err
	}
	srv, err := guestio.StartChild("serve", "serve", file)
	if err != nil {
		return err
	}
	f, err := srv.Expect(ctx, "ready")
	if err != nil {
		return err
	}
	id := f[1]
	dev := "/dev/ublkb" + id
	var (
		stalls, recoveries []float64
		ws                 *guestio.DirectWriters
	)
	for cycle := range killCycles {
		ws = guestio.StartDirectWriters(dev, 4, 0, 8*mib, 64<<10)
		if !ws.WaitProgress(30, 30*time.Second) {
			srv.Kill()
			ws.Finish()
			return fmt.Errorf("cycle %d: the writers do not progress: %v", cycle, ws.FirstErr())
		}
		killed := time.Now()
		srv.Kill()
		srv, err = guestio.StartChild(fmt.Sprintf("recover%d", cycle), "recover", id, file)
		if err != nil {
			ws.Finish()
			return err
		}
		if _, err := srv.Expect(ctx, "ready"); err != nil {
			ws.Finish()
			return fmt.Errorf("cycle %d: %w", cycle, err)
		}
		recovered := time.Since(killed)
		if !ws.WaitProgress(30, 60*time.Second) {
			ws.Finish()
			return fmt.Errorf("cycle %d: the writers do not resume after the recovery: %v", cycle, ws.FirstErr())
		}
		stall, err := ws.Finish()
		if err != nil {
			return fmt.Errorf("cycle %d: a writer failed across the kill: %w", cycle, err)
		}
		stalls = append(stalls, stall.Seconds())
		recoveries = append(recoveries, recovered.Seconds())
		fmt.Printf("    cycle %d: recovered in %v; longest write stall %v\n", cycle, recovered, stall)
		read, closeRead, err := guestio.ReadDirect(dev)
		if err != nil {
			return err
		}
		err = ws.Verify(read)
		closeRead()
		if err != nil {
			return fmt.Errorf("cycle %d, through the device: %w", cycle, err)
		}
	}
	s.Facts["kill_cycles"] = killCycles
	s.Facts["recovery_s"] = recoveries
	s.Facts["write_stall_s"] = stalls
	s.Facts["write_stall_median_s"] = median(stalls)
	s.Facts["write_stall_max_s"] = slices.Max(stalls)
	if err := srv.Send("stop"); err != nil {
		return err
	}
	if _, err := srv.Expect(ctx, "stopped"); err != nil {
		return err
	}
	if err := srv.Wait(); err != nil {
		return err
	}
	bf, err := os.Open(file)
	if err != nil {
		return err
	}
	defer bf.Close()
	if err := ws.Verify(func(p []byte, off int64) error { _, err := bf.ReadAt(p, off); return err }); err != nil {
		return fmt.Errorf("in the backing file: %w", err)
	}
	if _, err := os.Stat(dev); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s still there after the recovered server stopped it (%v)", dev, err)
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// optionCheck serves a fresh memory backend with cfg, which turns off
// the device flag off (named by option), and checks that the device has
// it off and that O_DIRECT I/O reads back what was written.
func optionCheck(ctx context.Context, cfg ublk.Config, option string, off uint64) error {
	mem, err := nbd.NewMemory(64 * mib)
	if err != nil {
		return err
	}
	cfg.Backend = mem
	dev, err := serve(ctx, cfg)
	if err != nil {
		return err
	}
	if dev.Info().Flags&off != 0 {
		_ = stopDelete(ctx, dev)
		return fmt.Errorf("%s device has flags %#x", option, dev.Info().Flags)
	}
	if err := directChecks(ctx, dev.Path(), mem); err != nil {
		_ = stopDelete(ctx, dev)
		return err
	}
	// directChecks' six whole-MiB requests at least
	if err := statsCheck(dev.Stats(), 6); err != nil {
		_ = stopDelete(ctx, dev)
		return fmt.Errorf("%s device: %w", option, err)
	}
	return stopDelete(ctx, dev)
}

// statsCheck checks a device's counters after at least min requests:
// every fetch, wake-up and commit carries at least one request, and a
// wake-up at least one fetch.
func statsCheck(st ublk.Stats, min uint64) error {
	switch {
	case st.Requests < min:
		return fmt.Errorf("stats %+v: %d requests, want at least %d", st, st.Requests, min)
	case st.Fetches == 0 || st.Fetches > st.Requests:
		return fmt.Errorf("stats %+v: fetches not in [1, requests]", st)
	case st.Wakeups == 0 || st.Wakeups > st.Fetches:
		return fmt.Errorf("stats %+v: wake-ups not in [1, fetches]", st)
	case st.Commits == 0 || st.Commits > st.Requests:
		return fmt.Errorf("stats %+v: commits not in [1, requests]", st)
	}
	return nil
}
