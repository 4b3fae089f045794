package vmtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
)

// moduleName turns a module path or name into the kernel's module name:
// the base name without .ko (and compression suffix), '-' as '_'.
func moduleName(s string) string {
	s = path.Base(s)
	if i := strings.Index(s, ".ko"); i >= 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "-", "_")
}

// addModules puts the named modules and everything they depend on (by
// the host's modules.dep) under /lib/modules/<release>, with a
// modules.dep listing just those, modules.builtin copied and an empty
// modules.alias: what github.com/pmorjan/kmod and busybox modprobe read.
// With compress, modules the host has uncompressed go in xz-compressed
// (.ko.xz, as Debian 13 and later ship them), so that a kernel that does
// not decompress modules itself makes the loader do it.
func addModules(a *archive, h Host, names []string, compress bool) error {
	dep, err := os.ReadFile(filepath.Join(h.ModulesDir, "modules.dep"))
	if err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	type line struct {
		path string
		deps []string
	}
	byName := make(map[string]line)
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(dep))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		p := strings.TrimSuffix(f[0], ":")
		n := moduleName(p)
		byName[n] = line{path: p, deps: f[1:]}
		order = append(order, n)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("modules.dep: %w", err)
	}

	builtin, err := os.ReadFile(filepath.Join(h.ModulesDir, "modules.builtin"))
	if err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	isBuiltin := make(map[string]bool)
	for _, l := range strings.Fields(string(builtin)) {
		isBuiltin[moduleName(l)] = true
	}

	want := make(map[string]bool)
	for _, n := range names {
		n = moduleName(n)
		l, ok := byName[n]
		if !ok && isBuiltin[n] {
			// built into this kernel (virtio_pci is from Linux 6.12 on
			// in Debian's): nothing to load
			continue
		}
		if !ok {
			return fmt.Errorf("module %q is in neither %s/modules.dep nor modules.builtin (not in this kernel)", n, h.ModulesDir)
		}
		want[n] = true
		for _, d := range l.deps {
			want[moduleName(d)] = true
		}
	}

	root := path.Join("lib/modules", h.Release)
	var out strings.Builder
	for _, n := range order {
		if !want[n] {
			continue
		}
		l := byName[n]
		data, err := os.ReadFile(filepath.Join(h.ModulesDir, l.path))
		if err != nil {
			return fmt.Errorf("module %s: %w", n, err)
		}
		name := l.path
		if compress && strings.HasSuffix(name, ".ko") {
			if data, err = xzModule(data); err != nil {
				return fmt.Errorf("module %s: %w", n, err)
			}
			name += ".xz"
		}
		a.file(path.Join(root, name), 0o644, data)
		out.WriteString(name + ":")
		for _, d := range l.deps {
			if compress && strings.HasSuffix(d, ".ko") {
				d += ".xz"
			}
			out.WriteString(" " + d)
		}
		out.WriteString("\n")
	}
	a.file(path.Join(root, "modules.dep"), 0o644, []byte(out.String()))
	a.file(path.Join(root, "modules.builtin"), 0o644, builtin)
	a.file(path.Join(root, "modules.alias"), 0o644, nil)
	return nil
}

// xzModule compresses a module the way the kernel's build does
// (CONFIG_MODULE_COMPRESS_XZ: CRC32 check, 1 MiB dictionary).
func xzModule(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := xz.WriterConfig{CheckSum: xz.CRC32, DictCap: 1 << 20}.NewWriter(&buf)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CRC32C returns the name of the module that provides crc32c to the
// crypto API in this kernel (ext4's and xfs's checksums need it, and the
// guest has no modprobe for the crypto API to call): crc32c_generic,
// crc32c_cryptoapi from Linux 6.15 on.
func (h Host) CRC32C() string {
	if h.HasModule("crc32c_generic") {
		return "crc32c_generic"
	}
	return "crc32c_cryptoapi"
}

// HasModule tells whether the kernel has name as a loadable module (in
// its modules.dep): module names change between releases
// (crc32c_generic is crc32c_cryptoapi since Linux 6.15).
func (h Host) HasModule(name string) bool {
	dep, err := os.ReadFile(filepath.Join(h.ModulesDir, "modules.dep"))
	if err != nil {
		return false
	}
	name = moduleName(name)
	for _, l := range strings.Split(string(dep), "\n") {
		if p, _, ok := strings.Cut(l, ":"); ok && moduleName(p) == name {
			return true
		}
	}
	return false
}

// KernelConfig returns the kernel's build configuration (CONFIG_* = value)
// from config-<release> next to its image or the config file in its
// modules directory (Linux 7.x packages), or nil when neither is there.
func (h Host) KernelConfig() map[string]string {
	var b []byte
	for _, p := range []string{
		filepath.Join(filepath.Dir(h.Kernel), "config-"+h.Release),
		filepath.Join(h.ModulesDir, "config"),
	} {
		var err error
		if b, err = os.ReadFile(p); err == nil {
			break
		}
	}
	if b == nil {
		return nil
	}
	cfg := make(map[string]string)
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = v
		}
	}
	return cfg
}
