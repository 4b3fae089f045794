package bench

import (
	"log/slog"
	"strings"
	"testing"
)

// TestVMTB checks that vmtest's Fatal and any testing.TB method vmTB
// lacks come back as errors, and that TempDir makes directories.
func TestVMTB(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	err := withVMTB(dir, log, func(tb testing.TB) error {
		if d := tb.TempDir(); !strings.HasPrefix(d, dir) || !fileExists(d) {
			t.Errorf("TempDir %q", d)
		}
		tb.Fatalf("missing %s", "qemu")
		return nil
	})
	if err == nil || err.Error() != "missing qemu" {
		t.Errorf("Fatalf gave %v", err)
	}
	err = withVMTB(dir, log, func(tb testing.TB) error {
		tb.Cleanup(func() {}) // not implemented: the embedded nil TB
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "VM harness: ") {
		t.Errorf("unimplemented method gave %v", err)
	}
}
