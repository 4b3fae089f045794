package bench

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/purerbd/purerbd/bench/internal/guestbench"
)

// saveProfiles reassembles the profiles the guest printed
// (guestbench.PrefixProfile lines: the CPU profiles of Config.VMProfile,
// taken at queue depth qd, and the node plugin's heap) into
// dir/NAME.pprof, with `go tool pprof -top` beside each as NAME.top, and
// notes where they are (dir's last element and the name: dir is a
// directory of the run's work directory).
func (k *KernelVM) saveProfiles(ctx context.Context, dir, console string, qd int) {
	chunks := map[string][]string{}
	for _, l := range strings.Split(console, "\n") {
		rest, ok := strings.CutPrefix(l, guestbench.PrefixProfile)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 3 {
			continue
		}
		i, n, err := splitPart(f[1])
		if err != nil || f[0] == "" || strings.ContainsAny(f[0], "/.") {
			continue
		}
		if chunks[f[0]] == nil {
			chunks[f[0]] = make([]string, n)
		}
		if c := chunks[f[0]]; len(c) == n && i <= n {
			c[i-1] = f[2]
		}
	}
	names := make([]string, 0, len(chunks))
	for name := range chunks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := saveProfile(ctx, dir, name, chunks[name]); err != nil {
			k.Notes = append(k.Notes, fmt.Sprintf("profile of the guest's %s server: %v", name, err))
			continue
		}
		what := fmt.Sprintf("CPU profile of the guest's %s server (4K QD%d reads and writes)", name, qd)
		switch name {
		case guestbench.ProfileNodeHeap:
			what = "heap profile of the guest's node plugin after the writes through its volumes"
		case guestbench.ProfileClient:
			what = fmt.Sprintf("CPU profile of the guest program running purerbd's rbd package with no device (4K QD%d reads and writes)", qd)
		}
		// named within the run's work directory: the notes reach
		// report.md, which names no path of the machine that ran it
		k.Notes = append(k.Notes, fmt.Sprintf("%s: %s in the run's work directory", what, filepath.Join(filepath.Base(dir), name+".pprof")))
	}
}

// splitPart reads "I/N" (1 ≤ I ≤ N).
func splitPart(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("part %q", s)
	}
	if i, err = strconv.Atoi(a); err != nil {
		return 0, 0, err
	}
	if n, err = strconv.Atoi(b); err != nil {
		return 0, 0, err
	}
	if i < 1 || n < i || n > 1<<16 {
		return 0, 0, fmt.Errorf("part %q", s)
	}
	return i, n, nil
}

func saveProfile(ctx context.Context, dir, name string, chunks []string) error {
	for i, c := range chunks {
		if c == "" {
			return fmt.Errorf("part %d of %d lost on the console", i+1, len(chunks))
		}
	}
	b, err := base64.StdEncoding.DecodeString(strings.Join(chunks, ""))
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name+".pprof")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=60", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go tool pprof: %w: %s", err, top)
	}
	return os.WriteFile(filepath.Join(dir, name+".top"), top, 0o644)
}
