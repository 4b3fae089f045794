package ublk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/pmorjan/kmod"

	"github.com/purerbd/purerbd/nbd/kernel"
)

// ModuleName is the ublk driver's module.
const ModuleName = "ublk_drv"

// ModuleConfig says how to load ublk_drv. The zero value loads it from
// /lib/modules.
type ModuleConfig struct {
	// RootDir holds <release>/modules.dep (default /lib/modules).
	RootDir string
	// IgnoreStatus skips reading /proc/modules; a loaded module is still
	// recognised by /sys/module/ublk_drv.
	IgnoreStatus bool
	// SysfsRoot is where sysfs is mounted (default /sys).
	SysfsRoot string
	// Logger gets a line for the module file loaded (nil logs nothing).
	Logger *slog.Logger
}

// LoadModule loads ublk_drv (compressed or not, through
// kernel.InitModuleFile), unless it is loaded or built in already. A
// kernel without the module gives an error wrapping ErrUnsupported.
func LoadModule(ctx context.Context, cfg ModuleConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sysfs := cfg.SysfsRoot
	if sysfs == "" {
		sysfs = "/sys"
	}
	if _, err := os.Stat(filepath.Join(sysfs, "module", ModuleName)); err == nil {
		return nil
	}
	opts := []kmod.Option{kmod.SetInitFunc(func(path, params string, flags int) error {
		if err := kernel.InitModuleFile(path, params, flags); err != nil {
			return err
		}
		if cfg.Logger != nil {
			cfg.Logger.Info("kernel module loaded", "file", path)
		}
		return nil
	})}
	if cfg.RootDir != "" {
		opts = append(opts, kmod.SetRootDir(cfg.RootDir))
	}
	if cfg.IgnoreStatus {
		opts = append(opts, kmod.SetIgnoreStatus())
	}
	k, err := kmod.New(opts...)
	if err != nil {
		return fmt.Errorf("load %s: %w", ModuleName, err)
	}
	if err := k.Load(ModuleName, "", 0); err != nil {
		if errors.Is(err, kmod.ErrModuleNotFound) {
			return fmt.Errorf("load %s: %w: %w", ModuleName, ErrUnsupported, err)
		}
		return fmt.Errorf("load %s: %w", ModuleName, err)
	}
	return nil
}
