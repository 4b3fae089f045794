package cephcluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// mapsLibrary tells whether the process pid has a library whose path
// contains name mapped.
func mapsLibrary(t *testing.T, pid int, name string) bool {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(maps), name)
}

// TestDaemonsMalloc boots clusters (Ceph must be installed: make deps)
// and checks which allocator the daemons run with: tcmalloc by default,
// glibc's with GlibcMalloc, and the OSD's PG log bounds in ceph.conf.
func TestDaemonsMalloc(t *testing.T) {
	shorttier.Skip(t, "a Ceph cluster")
	for _, glibc := range []bool{false, true} {
		t.Run(fmt.Sprintf("GlibcMalloc=%v", glibc), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// the host's packages: sid's Ceph (ReleaseTentacle) links
			// tcmalloc itself, so GlibcMalloc cannot take it away there
			c, err := Start(ctx, Options{Pool: "-", GlibcMalloc: glibc, Release: ReleaseHost})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, d := range []string{"mon.a", "osd.0"} {
				if got := mapsLibrary(t, c.PID(d), "libtcmalloc"); got == glibc {
					t.Errorf("%s: libtcmalloc mapped = %v with GlibcMalloc %v", d, got, glibc)
				}
			}
			conf, err := os.ReadFile(c.Conf)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"osd max pg log entries = 1000", "osd pg log dups tracked = 1000"} {
				if !strings.Contains(string(conf), want) {
					t.Errorf("ceph.conf lacks %q", want)
				}
			}
		})
	}
}
