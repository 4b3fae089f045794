package vmtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
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
func addModules(a *archive, h Host, names []string) error {
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

	want := make(map[string]bool)
	for _, n := range names {
		n = moduleName(n)
		l, ok := byName[n]
		if !ok {
			return fmt.Errorf("module %q is not in %s/modules.dep (built in, or not in this kernel)", n, h.ModulesDir)
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
		a.file(path.Join(root, l.path), 0o644, data)
		out.WriteString(l.path + ":")
		for _, d := range l.deps {
			out.WriteString(" " + d)
		}
		out.WriteString("\n")
	}
	a.file(path.Join(root, "modules.dep"), 0o644, []byte(out.String()))
	builtin, err := os.ReadFile(filepath.Join(h.ModulesDir, "modules.builtin"))
	if err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	a.file(path.Join(root, "modules.builtin"), 0o644, builtin)
	a.file(path.Join(root, "modules.alias"), 0o644, nil)
	return nil
}
