package kernel

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/pmorjan/kmod"
)

// ModuleConfig says how to load nbd.ko. The zero value loads it from
// /lib/modules with the module's defaults.
type ModuleConfig struct {
	// NbdsMax is the number of devices made at load time (nbds_max; 0
	// keeps the module's default of 16). CONNECT with AnyIndex adds
	// devices beyond it.
	NbdsMax int
	// MaxPart is the number of partitions per device (max_part; 0 keeps
	// the default, which is none).
	MaxPart int
	// RootDir holds <release>/modules.dep (default /lib/modules).
	RootDir string
	// IgnoreStatus skips reading /proc/modules (absent in some
	// containers); an already loaded module is then still recognised by
	// /sys/module/nbd.
	IgnoreStatus bool
	// InitFunc loads a module file (default InitModuleFile, which takes
	// .ko, .ko.xz, .ko.zst and .ko.gz).
	InitFunc kmod.InitFunc
	// SysfsRoot is where sysfs is mounted (default /sys).
	SysfsRoot string
	// Logger gets a line for each module file loaded and how (nil logs
	// nothing); not used with InitFunc set.
	Logger *slog.Logger
}

// LoadModule loads nbd.ko and its dependencies, unless nbd is already
// loaded or built in. Module parameters apply only when it really loads.
// Resolving the nbd family does not load the module on its own (nbd.ko has
// no module alias), so call this before Open.
func LoadModule(ctx context.Context, cfg ModuleConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if loaded, err := sysfsAt(cfg.SysfsRoot).nbdLoaded(); err != nil {
		return fmt.Errorf("load nbd module: %w", err)
	} else if loaded {
		return nil
	}
	var opts []kmod.Option
	if cfg.RootDir != "" {
		opts = append(opts, kmod.SetRootDir(cfg.RootDir))
	}
	if cfg.IgnoreStatus {
		opts = append(opts, kmod.SetIgnoreStatus())
	}
	initFunc := cfg.InitFunc
	if initFunc == nil {
		log := cfg.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		sys := systemModuleSyscalls()
		initFunc = func(path, params string, flags int) error {
			how, err := sys.load(path, params, flags)
			if err == nil {
				log.Info("kernel module loaded", "file", path, "params", params, "how", how)
			}
			return err
		}
	}
	opts = append(opts, kmod.SetInitFunc(initFunc))
	k, err := kmod.New(opts...)
	if err != nil {
		return fmt.Errorf("load nbd module: %w", err)
	}
	var params []string
	if cfg.NbdsMax > 0 {
		params = append(params, "nbds_max="+strconv.Itoa(cfg.NbdsMax))
	}
	if cfg.MaxPart > 0 {
		params = append(params, "max_part="+strconv.Itoa(cfg.MaxPart))
	}
	if err := k.Load("nbd", strings.Join(params, " "), 0); err != nil {
		return fmt.Errorf("load nbd module: %w", err)
	}
	return nil
}
