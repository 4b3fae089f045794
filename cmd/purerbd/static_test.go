package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestBinariesStatic builds every binary under cmd/ the way `make build`
// does and checks each is a static executable: no ELF interpreter and no
// shared-library dependencies, so it runs in a FROM scratch image.
func TestBinariesStatic(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-o", out+"/", "../...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	bins, _ := filepath.Glob(filepath.Join(out, "*"))
	if len(bins) == 0 {
		t.Fatal("no binaries built")
	}
	for _, p := range bins {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s has an ELF interpreter: dynamically linked", filepath.Base(p))
			}
		}
		if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
			t.Errorf("%s needs shared libraries %v (%v)", filepath.Base(p), libs, err)
		}
		f.Close()
		t.Logf("%s: static", filepath.Base(p))
	}
}
