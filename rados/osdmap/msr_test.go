package osdmap

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/shorttier"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// Pools whose CRUSH rule is of Squid's MSR types (msr_firstn, msr_indep)
// are placed like any other: Tentacle's osdmaptool builds the maps (a
// pool of rule 0, some OSDs out or reweighted) and dumps every placement
// group, here and in testdata/msr-tentacle for TestPlacementMSRKept.

var updateMSR = flag.Bool("update-msr", false, "rewrite testdata/msr-tentacle from Tentacle's osdmaptool")

const msrKept = "testdata/msr-tentacle"

const msrCrushHead = `tunable choose_local_tries 0
tunable choose_local_fallback_tries 0
tunable choose_total_tries 50
tunable chooseleaf_descend_once 1
tunable chooseleaf_vary_r 1
tunable chooseleaf_stable 1
tunable straw_calc_version 1
tunable allowed_bucket_algs 54
device 0 osd.0
device 1 osd.1
device 2 osd.2
device 3 osd.3
device 4 osd.4
device 5 osd.5
device 6 osd.6
device 7 osd.7
device 8 osd.8
type 0 osd
type 1 host
type 2 root
host h0 { id -1 alg straw2 hash 0 item osd.0 weight 1.0 item osd.1 weight 1.0 item osd.2 weight 1.0 }
host h1 { id -2 alg straw2 hash 0 item osd.3 weight 1.0 item osd.4 weight 1.0 item osd.5 weight 1.0 }
host h2 { id -3 alg straw2 hash 0 item osd.6 weight 1.0 item osd.7 weight 1.0 item osd.8 weight 1.0 }
root default { id -4 alg straw2 hash 0 item h0 weight 3.0 item h1 weight 3.0 item h2 weight 3.0 }
`

type msrMap struct {
	name   string
	rule   string // rule 0, used by the default pool
	passes []string
}

func msrMaps() []msrMap {
	return []msrMap{
		{"firstn", "rule msr_rep { id 0 type msr_firstn step take default step choosemsr 3 type host step choosemsr 1 type osd step emit }",
			[]string{"--mark-up-in --mark-out 4 --adjust-crush-weight 0:2.0,7:0.5 --save"}},
		// two OSDs of one host out: the rule moves them to another host
		{"indep", "rule msr_ec { id 0 type msr_indep step take default step choosemsr 2 type host step choosemsr 2 type osd step emit }",
			[]string{"--mark-up-in --mark-out 3 --mark-out 5 --adjust-crush-weight 8:0.3 --save"}},
	}
}

// buildInRoot builds an msrMap with the sid root's osdmaptool and
// crushtool, in dir (under the root's /tmp), and returns its path.
func (b msrMap) buildInRoot(t *testing.T, root, dir string) string {
	inside := func(name string) string {
		rel, _ := filepath.Rel(root, filepath.Join(dir, name))
		return "/" + rel
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("chroot", append([]string{root}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out.String())
		}
	}
	if err := os.WriteFile(filepath.Join(dir, b.name+".txt"), []byte(msrCrushHead+b.rule+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("osdmaptool", "--createsimple", "9", "--with-default-pool", "--pg-bits", "4", "--clobber", inside(b.name))
	run("crushtool", "-c", inside(b.name+".txt"), "-o", inside(b.name+".crush"))
	run("osdmaptool", inside(b.name), "--import-crush", inside(b.name+".crush"))
	for _, p := range b.passes {
		run(append([]string{"osdmaptool", inside(b.name)}, strings.Fields(p)...)...)
	}
	return filepath.Join(dir, b.name)
}

// TestPlacementMSRTentacle compares every placement group of the MSR
// maps with Tentacle's osdmaptool --test-map-pgs-dump-all, and the maps
// and dumps with those kept in testdata/msr-tentacle (rewritten instead
// with -update-msr).
func TestPlacementMSRTentacle(t *testing.T) {
	shorttier.Skip(t, "Ceph 20.2's osdmaptool (the sid root)")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	root, err := cephcluster.EnsureRoot(ctx, cephcluster.ReleaseTentacle)
	if err != nil {
		t.Fatalf("the Tentacle root is required for this test: %v", err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "purerbd-osdmap-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, b := range msrMaps() {
		t.Run(b.name, func(t *testing.T) {
			path := b.buildInRoot(t, root, dir)
			rel, _ := filepath.Rel(root, path)
			cmd := exec.Command("chroot", root, "osdmaptool", "/"+rel, "--test-map-pgs-dump-all")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("osdmaptool --test-map-pgs-dump-all: %v: %s", err, stderr.String())
			}
			if i := bytes.Index(want, []byte("#osd\t")); i >= 0 {
				want = want[:i]
			}
			m := readMap(t, path)
			got := ourDumpAll(m)
			compareLines(t, b.name, got, want)
			if !bytes.Contains(want, []byte("raw ([")) || bytes.Contains(want, []byte("raw ([]")) {
				t.Errorf("osdmaptool left placement groups unmapped:\n%s", want)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if *updateMSR {
				if err := os.MkdirAll(msrKept, 0o755); err != nil {
					t.Fatal(err)
				}
				for file, data := range map[string][]byte{b.name + ".osdmap": raw, b.name + ".dump": want} {
					if err := os.WriteFile(filepath.Join(msrKept, file), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			// (the maps themselves differ: they record when they were made)
			if _, keptDump := readMSRKept(t, b.name); !bytes.Equal(keptDump, want) {
				t.Errorf("osdmaptool maps %s otherwise than %s keeps (rerun with -update-msr)", b.name, msrKept)
			}
		})
	}
}

func readMSRKept(t *testing.T, name string) (osdmap, dump []byte) {
	t.Helper()
	osdmap, err := os.ReadFile(filepath.Join(msrKept, name+".osdmap"))
	if err != nil {
		t.Fatal(err)
	}
	dump, err = os.ReadFile(filepath.Join(msrKept, name+".dump"))
	if err != nil {
		t.Fatal(err)
	}
	return osdmap, dump
}

// TestPlacementMSRKept checks the placements of the kept MSR maps against
// Tentacle's dumps of them, without Ceph.
func TestPlacementMSRKept(t *testing.T) {
	for _, b := range msrMaps() {
		raw, dump := readMSRKept(t, b.name)
		m, err := Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		if len(dump) == 0 {
			t.Fatalf("%s: empty dump", b.name)
		}
		compareLines(t, b.name, ourDumpAll(m), dump)
	}
}
