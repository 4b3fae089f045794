package nbd_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// run runs a program and fails the test with its output on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60e9)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestNbdinfoList(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	a, _ := nbd.NewMemory(1 << 20)
	b, _ := nbd.NewMemory(3 << 20)
	srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{
		{Name: "alpha", Description: "first disk", Backend: a},
		{Name: "beta", Backend: b, ReadOnly: true},
	}})
	out := run(t, nbdinfo, "--list", "--json", srv.URI(""))
	var list struct {
		Exports []struct {
			Name        string   `json:"export-name"`
			Description string   `json:"description"`
			Size        int64    `json:"export-size"`
			ReadOnly    bool     `json:"is_read_only"`
			MinBlock    int64    `json:"block_size_minimum"`
			PrefBlock   int64    `json:"block_size_preferred"`
			MaxBlock    int64    `json:"block_size_maximum"`
			CanFlush    bool     `json:"can_flush"`
			CanTrim     bool     `json:"can_trim"`
			CanZero     bool     `json:"can_zero"`
			CanMulti    bool     `json:"can_multi_conn"`
			Contexts    []string `json:"contexts"`
		} `json:"exports"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("nbdinfo --list --json output: %v\n%s", err, out)
	}
	if len(list.Exports) != 2 {
		t.Fatalf("nbdinfo listed %d exports:\n%s", len(list.Exports), out)
	}
	x, y := list.Exports[0], list.Exports[1]
	if x.Name != "alpha" || x.Description != "first disk" || x.Size != 1<<20 || x.ReadOnly || !x.CanFlush || !x.CanTrim || !x.CanZero || !x.CanMulti {
		t.Errorf("alpha: %+v", x)
	}
	if x.MinBlock != 1 || x.PrefBlock != 4096 || x.MaxBlock != 32<<20 {
		t.Errorf("alpha block sizes: %+v", x)
	}
	if len(x.Contexts) != 1 || x.Contexts[0] != "base:allocation" {
		t.Errorf("alpha contexts: %v", x.Contexts)
	}
	if y.Name != "beta" || y.Size != 3<<20 || !y.ReadOnly || y.CanTrim || y.CanZero {
		t.Errorf("beta: %+v", y)
	}
}

func TestNbdinfoMap(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	srv, m := nbdtest.StartMemory(t, "disk", 4<<20)
	ctx := context.Background()
	// Data at [64K, 192K) and [1M, 1M+64K); the rest holes.
	buf := make([]byte, 128<<10)
	for i := range buf {
		buf[i] = 0xa5
	}
	if _, err := m.WriteAt(ctx, buf, 64<<10); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteAt(ctx, buf[:64<<10], 1<<20); err != nil {
		t.Fatal(err)
	}
	out := run(t, nbdinfo, "--map", "--json", srv.URI("disk"))
	var extents []struct {
		Offset int64 `json:"offset"`
		Length int64 `json:"length"`
		Type   int   `json:"type"`
	}
	if err := json.Unmarshal([]byte(out), &extents); err != nil {
		t.Fatalf("nbdinfo --map --json: %v\n%s", err, out)
	}
	type ext struct {
		off, n int64
		typ    int
	}
	want := []ext{{0, 64 << 10, 3}, {64 << 10, 128 << 10, 0}, {192 << 10, 1<<20 - 192<<10, 3}, {1 << 20, 64 << 10, 0}, {1<<20 + 64<<10, 4<<20 - 1<<20 - 64<<10, 3}}
	if len(extents) != len(want) {
		t.Fatalf("nbdinfo --map: got %s", out)
	}
	for i, e := range extents {
		if (ext{e.Offset, e.Length, e.Type}) != want[i] {
			t.Errorf("extent %d: got %+v want %+v", i, e, want[i])
		}
	}
	// The plain output names the kinds.
	if out := run(t, nbdinfo, "--map", srv.URI("disk")); !strings.Contains(out, "hole,zero") || !strings.Contains(out, "data") {
		t.Errorf("nbdinfo --map:\n%s", out)
	}
}

func TestNbdinfoJSON(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	srv, _ := nbdtest.StartMemory(t, "", 5<<20)
	out := run(t, nbdinfo, "--json", srv.URI(""))
	var info struct {
		Protocol string `json:"protocol"`
		TLS      bool   `json:"TLS"`
		Exports  []struct {
			Size       int64 `json:"export-size"`
			Structured bool  `json:"can_df"`
			FastZero   bool  `json:"can_fast_zero"`
			Cache      bool  `json:"can_cache"`
			FUA        bool  `json:"can_fua"`
		} `json:"exports"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("nbdinfo --json: %v\n%s", err, out)
	}
	if info.Protocol != "newstyle-fixed" || len(info.Exports) != 1 {
		t.Fatalf("nbdinfo --json:\n%s", out)
	}
	e := info.Exports[0]
	if e.Size != 5<<20 || !e.Structured || !e.FastZero || !e.Cache || !e.FUA {
		t.Errorf("nbdinfo --json: %+v\n%s", e, out)
	}
}
