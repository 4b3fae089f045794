package guestio

import (
	"errors"
	"fmt"

	"github.com/pmorjan/kmod"

	"github.com/purerbd/purerbd/nbd/kernel"
)

// LoadModules loads kernel modules inside a guest as the node plugin
// loads nbd.ko: from the initramfs's /lib/modules (no /proc/modules
// needed), compressed module files included (kernel.InitModuleFile).
// "crc32c" stands for the module that provides the crc32c the file
// systems ask the crypto API for, which has no modprobe to call in the
// guest: crc32c_generic, named crc32c_cryptoapi since Linux 6.15.
func LoadModules(names ...string) error {
	k, err := kmod.New(kmod.SetIgnoreStatus(), kmod.SetInitFunc(kernel.InitModuleFile))
	if err != nil {
		return fmt.Errorf("load modules: %w", err)
	}
	for _, name := range names {
		if name == "crc32c" {
			name = "crc32c_generic"
			if err = k.Load(name, "", 0); errors.Is(err, kmod.ErrModuleNotFound) {
				name = "crc32c_cryptoapi"
				err = k.Load(name, "", 0)
			}
		} else {
			err = k.Load(name, "", 0)
		}
		if err != nil {
			return fmt.Errorf("load %s: %w", name, err)
		}
	}
	return nil
}
