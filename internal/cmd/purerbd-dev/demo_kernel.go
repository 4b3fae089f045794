package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// attachDemoKernel attaches the demo image to /dev/nbdN through the
// kernel's nbd driver, served by this process, and checks that the
// kernel reads what purerbd and librbd read (sha256 want). It returns
// the device, or why the kernel path is not available on this machine
// (not root, no nbd.ko, no netlink family, attach refused).
func attachDemoKernel(ctx context.Context, b nbd.Backend, want string) (*kernel.Device, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("not running as root (attaching /dev/nbdN needs CAP_SYS_ADMIN)")
	}
	_, noModules := os.Stat("/proc/modules")
	if err := kernel.LoadModule(ctx, kernel.ModuleConfig{IgnoreStatus: noModules != nil}); err != nil {
		return nil, fmt.Errorf("the kernel's nbd driver is not available: %w", err)
	}
	log := slog.New(slog.DiscardHandler)
	dev, err := kernel.Attach(ctx, kernel.AttachConfig{
		Backend: b, Index: kernel.AnyIndex, Timeout: 30 * time.Second,
		Server: nbd.Config{Logger: log}, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("attaching through the kernel failed: %w", err)
	}
	got, err := deviceSHA256(dev.Path())
	if err == nil && got != want {
		err = fmt.Errorf("%s reads sha256 %s, the image %s", dev.Path(), got, want)
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, dev.Detach(dctx))
	}
	return dev, nil
}

// deviceSHA256 hashes a whole block device as the kernel reads it.
func deviceSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
