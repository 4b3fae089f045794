package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// runSmoke is the short check of a kernel (make vm-kernels): nbd.ko
// loaded through kernel.LoadModule from the file the kernel's package
// ships (compressed on Debian 13 and later), an in-process export
// attached, written and read with O_DIRECT and detached, and a CONNECT
// from a network namespace other than the initial one, whose outcome is
// a fact, not a failure.
func runSmoke(ctx context.Context) error {
	s := &scenario{start: time.Now(), Report: guestio.NewReport()}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		s.Facts["kernel"] = unix.ByteSliceToString(uts.Release[:])
	}
	return s.Finish(s.smoke(ctx))
}

func (s *scenario) smoke(ctx context.Context) error {
	if err := s.Step("load nbd module", func() error { return s.loadNBDLogged(ctx) }); err != nil {
		return err
	}
	if err := s.Step("open netlink client", func() error {
		var err error
		s.client, err = kernel.Open(ctx, kernel.ClientConfig{})
		if err != nil {
			return err
		}
		s.Facts["backend_identifier"] = s.client.BackendIdentifierSupported()
		return nil
	}); err != nil {
		return err
	}
	defer s.client.Close()
	if err := s.Step("memory backend in process", func() error { return s.memoryInProcess(ctx) }); err != nil {
		return err
	}
	return s.Step("CONNECT from another network namespace", func() error { return s.connectInNetns(ctx) })
}

// loadNBDLogged loads nbd through kernel.LoadModule and records which
// file it loaded and how (the kernel decompressing, or this process).
func (s *scenario) loadNBDLogged(ctx context.Context) error {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	if err := kernel.LoadModule(ctx, kernel.ModuleConfig{NbdsMax: 4, Logger: log}); err != nil {
		return err
	}
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var rec struct{ Msg, File, How string }
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("log line %q: %w", line, err)
		}
		fmt.Printf("    %s: %s (%s)\n", rec.Msg, rec.File, rec.How)
		if path.Base(rec.File) != "" {
			s.Facts["nbd_module_file"] = path.Base(rec.File)
			s.Facts["nbd_module_load"] = rec.How
		}
	}
	if _, ok := s.Facts["nbd_module_load"]; !ok {
		return errors.New("LoadModule loaded no module file (nbd already loaded or built in?)")
	}
	return nil
}

// connectInNetns attaches an export from a thread in a new network
// namespace: its netlink socket lives there. Whether the nbd family
// answers there (netns_family: Linux made it namespace-aware in a later
// release) and how Attach then attached (netns_connect: netlink, or the
// ioctl interface it falls back to) are recorded as facts.
func (s *scenario) connectInNetns(ctx context.Context) error {
	mem, err := nbd.NewMemory(8 * mib)
	if err != nil {
		return err
	}
	type outcome struct {
		netns, family, iface string
		err                  error
		idx                  int
	}
	done := make(chan outcome, 1)
	go func() {
		// the thread stays locked and ends with the goroutine: it never
		// returns to the initial namespace
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- outcome{err: fmt.Errorf("unshare: %w", err), idx: -1}
			return
		}
		o := outcome{netns: kernel.CurrentNetns("").String(), idx: -1, family: "resolves"}
		if c, err := kernel.Open(ctx, kernel.ClientConfig{}); err != nil {
			o.family = "fails: " + err.Error()
		} else {
			c.Close()
		}
		dev, err := kernel.Attach(ctx, kernel.AttachConfig{
			Backend: mem, BlockSize: 4096, Conns: 1, Cookie: "netns-0001",
			Index: kernel.AnyIndex, Logger: logger("netns"),
		})
		if err != nil {
			o.err = err
			done <- o
			return
		}
		o.idx = dev.Index()
		o.iface = dev.Interface()
		data := make([]byte, mib)
		rand.Read(data)
		if err := guestio.DirectIO(dev.Path(), data, 0); err != nil {
			o.err = fmt.Errorf("I/O after CONNECT in the namespace: %w", err)
		}
		if err := dev.Detach(ctx); err != nil && o.err == nil {
			o.err = fmt.Errorf("DISCONNECT in the namespace: %w", err)
		}
		done <- o
	}()
	o := <-done
	s.Facts["netns_of_connect"] = o.netns
	s.Facts["netns_family"] = o.family
	fmt.Printf("    nbd family from another netns: %s\n", o.family)
	if o.err != nil {
		s.Facts["netns_connect"] = "fails: " + o.err.Error()
		fmt.Printf("    CONNECT from another netns: %v\n", o.err)
		return nil
	}
	s.Facts["netns_connect"] = "works (" + o.iface + ")"
	return s.waitFree(ctx, o.idx)
}
