package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/bench/internal/guestbench"
)

// TestSaveProfiles checks that profiles printed in PROFILE lines, cut
// among other console lines, come back whole, and that one with a lost
// line is reported instead of saved.
func TestSaveProfiles(t *testing.T) {
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		t.Fatal(err)
	}
	pprof.StopCPUProfile()
	s := base64.StdEncoding.EncodeToString(prof.Bytes())
	var console strings.Builder
	parts := []string{s[:len(s)/3], s[len(s)/3 : 2*len(s)/3], s[2*len(s)/3:]}
	for i, p := range parts {
		fmt.Fprintf(&console, "%sublk %d/3 %s\n[    1.0] some kernel message\n", guestbench.PrefixProfile, i+1, p)
		if i != 1 {
			fmt.Fprintf(&console, "%snbd %d/3 %s\n", guestbench.PrefixProfile, i+1, p)
		}
	}
	dir := t.TempDir()
	var k KernelVM
	k.saveProfiles(context.Background(), dir, console.String(), 1)
	got, err := os.ReadFile(filepath.Join(dir, "ublk.pprof"))
	if err != nil || !bytes.Equal(got, prof.Bytes()) {
		t.Fatalf("ublk.pprof: %d bytes, %v; want the %d bytes printed", len(got), err, prof.Len())
	}
	if _, err := os.Stat(filepath.Join(dir, "ublk.top")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nbd.pprof")); err == nil {
		t.Fatal("nbd.pprof saved with a part missing")
	}
	notes := strings.Join(k.Notes, "\n")
	if !strings.Contains(notes, "nbd server: part 2 of 3 lost") || !strings.Contains(notes, filepath.Join(filepath.Base(dir), "ublk.pprof")+" in the run's work directory") ||
		!strings.Contains(notes, "4K QD1 reads") || strings.Contains(notes, dir) {
		t.Fatalf("notes %q", notes)
	}
}
