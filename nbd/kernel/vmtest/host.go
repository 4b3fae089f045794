package vmtest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// Host is what a VM boot needs from the machine running the test.
type Host struct {
	// Kernel is the kernel image (/boot/vmlinuz-<Release>).
	Kernel string
	// Suite is the Debian suite the kernel comes from: "bookworm" for
	// the host's own, else what KernelEnv named.
	Suite string
	// Release is the kernel release; its modules are in ModulesDir.
	Release    string
	ModulesDir string
	// QEMU is qemu-system-x86_64, Busybox a statically linked busybox.
	QEMU    string
	Busybox string
}

// Debian packages that provide the pieces.
const (
	pkgKernel  = "linux-image-amd64"
	pkgQEMU    = "qemu-system-x86"
	pkgBusybox = "busybox-static"
)

// FindHost locates the newest installed kernel that has its modules (or,
// with PURERBD_KERNEL=trixie or sid, that suite's kernel, fetched once
// into the cache: see KernelEnv), qemu and a static busybox. It fails tb, naming the Debian packages to
// install, when something is missing: tests that need a VM never skip,
// except under -short, whose tier boots no VM (see internal/shorttier).
func FindHost(tb testing.TB) Host {
	tb.Helper()
	shorttier.Skip(tb, "qemu and a kernel (a VM test)")
	var h Host
	var missing []string
	need := func(pkg, what string) {
		missing = append(missing, pkg+" ("+what+")")
	}

	suite, err := KernelSuite()
	if err != nil {
		tb.Fatal(err)
	}
	if suite != "" {
		findSuiteKernel(tb, &h, suite)
	} else {
		h.Kernel, h.Release, h.ModulesDir = newestKernel("/boot", "/lib/modules")
		h.Suite = hostSuite
		if h.Kernel == "" {
			need(pkgKernel, "no /boot/vmlinuz-* with /lib/modules/<release>/modules.dep")
		} else if _, err := os.Open(h.Kernel); err != nil {
			need(pkgKernel, "kernel image not readable: "+err.Error())
		}
	}

	if p, err := exec.LookPath("qemu-system-x86_64"); err == nil {
		h.QEMU = p
	} else {
		need(pkgQEMU, "no qemu-system-x86_64")
	}

	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if isStatic(p) {
			h.Busybox = p
			break
		}
	}
	if h.Busybox == "" {
		need(pkgBusybox, "no statically linked /bin/busybox")
	}

	if len(missing) > 0 {
		tb.Fatalf("the VM test needs Debian packages: %s; install them with\n  apt-get install -y --no-install-recommends %s",
			strings.Join(missing, "; "), strings.Join(pkgNames(missing), " "))
	}
	return h
}

// newestKernel returns the newest bootDir/vmlinuz-<release> that has
// modulesRoot/<release>/modules.dep, or "" when there is none.
func newestKernel(bootDir, modulesRoot string) (kernel, release, modulesDir string) {
	images, _ := filepath.Glob(filepath.Join(bootDir, "vmlinuz-*"))
	sort.Slice(images, func(i, j int) bool { return versionLess(images[j], images[i]) })
	for _, img := range images {
		rel := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		dir := filepath.Join(modulesRoot, rel)
		if _, err := os.Stat(filepath.Join(dir, "modules.dep")); err == nil {
			return img, rel, dir
		}
	}
	return "", "", ""
}

func pkgNames(missing []string) []string {
	var l []string
	for _, m := range missing {
		l = append(l, strings.Fields(m)[0])
	}
	return l
}

// isStatic reports whether path is an ELF executable without an
// interpreter.
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// versionLess orders kernel image names by release, numerically where
// both sides have digits.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		da, ra := leadingNumber(a)
		db, rb := leadingNumber(b)
		if da >= 0 && db >= 0 {
			if da != db {
				return da < db
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingNumber(s string) (int, string) {
	i := 0
	n := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' && i < 9 {
		n = n*10 + int(s[i]-'0')
		i++
	}
	if i == 0 {
		return -1, s
	}
	return n, s[i:]
}
