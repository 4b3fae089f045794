package vmtest

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// libraryDirs are searched for shared libraries, in the dynamic loader's
// default order on Debian amd64.
func libraryDirs() []string {
	return []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
}

// addProgram puts a host executable at the same path in the archive, with
// its dynamic loader and the shared libraries it needs, transitively.
func addProgram(a *archive, prog string) error {
	seen := make(map[string]bool)
	var add func(p string, isProgram bool) error
	add = func(p string, isProgram bool) error {
		if seen[p] {
			return nil
		}
		seen[p] = true
		data, err := os.ReadFile(p) // follows symlinks: the guest gets a copy
		if err != nil {
			return err
		}
		perm := uint32(0o644)
		if isProgram {
			perm = 0o755
		}
		a.file(p, perm, data)
		f, err := elf.Open(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		defer f.Close()
		for _, pr := range f.Progs {
			if pr.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, pr.Filesz)
			if _, err := pr.ReadAt(b, 0); err != nil {
				return fmt.Errorf("%s: interpreter: %w", p, err)
			}
			interp := string(b)
			if i := len(interp); i > 0 && interp[i-1] == 0 {
				interp = interp[:i-1]
			}
			if err := add(interp, true); err != nil {
				return err
			}
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		// a library's RUNPATH (or RPATH) comes before the default
		// directories (Ceph's libraries find libceph-common so)
		dirs := libraryDirs()
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			if paths, err := f.DynString(tag); err == nil {
				for _, v := range paths {
					dirs = append(filepath.SplitList(strings.ReplaceAll(v, "$ORIGIN", filepath.Dir(p))), dirs...)
				}
			}
		}
		for _, lib := range libs {
			found := ""
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s: shared library %s not found", p, lib)
			}
			if err := add(found, false); err != nil {
				return err
			}
		}
		return nil
	}
	return add(prog, true)
}
