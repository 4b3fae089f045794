package osdmap

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

// The placement oracle compares every placement group of every pool with
// `osdmaptool --test-map-pgs-dump-all` (raw CRUSH set, up set, acting set
// and their primaries) and object names with `osdmaptool
// --test-map-object`, on maps captured from a live cluster
// (testdata/live-16.2.15) and on maps built with osdmaptool and crushtool
// in the test.

func tool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(needTool(t, name), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func intList(b []byte, v []int32) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']')
}

// ourDumpAll formats our placements like --test-map-pgs-dump-all.
func ourDumpAll(m *OSDMap) []byte {
	ids := make([]int64, 0, len(m.Pools))
	for id := range m.Pools {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var b []byte
	for _, id := range ids {
		p := m.Pools[id]
		b = fmt.Appendf(b, "pool %d pg_num %d\n", id, p.PGNum)
		for ps := uint32(0); ps < p.PGNum; ps++ {
			pg := denc.PG{Pool: uint64(id), Seed: ps}
			raw, rawPrimary := m.RawOSDs(pg)
			mp := m.PGToUpActing(pg)
			b = append(b, pg.String()...)
			b = append(b, " raw ("...)
			b = intList(b, raw)
			b = fmt.Appendf(b, ", p%d) up (", rawPrimary)
			b = intList(b, mp.Up)
			b = fmt.Appendf(b, ", p%d) acting (", mp.UpPrimary)
			b = intList(b, mp.Acting)
			b = fmt.Appendf(b, ", p%d)\n", mp.ActingPrimary)
		}
	}
	return b
}

// toolDumpAll returns osdmaptool's per-PG lines (the summary that follows
// them is compared by the CLI tests).
func toolDumpAll(t *testing.T, path string) []byte {
	out := tool(t, "osdmaptool", path, "--test-map-pgs-dump-all")
	if i := bytes.Index(out, []byte("#osd\t")); i >= 0 {
		out = out[:i]
	}
	return out
}

func compareLines(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	bad := 0
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			t.Errorf("%s line %d:\n got  %s\n want %s", what, i+1, gl[i], wl[i])
			if bad++; bad == 5 {
				break
			}
		}
	}
	if len(gl) != len(wl) {
		t.Errorf("%s: %d lines, want %d", what, len(gl), len(wl))
	}
}

// objectNames are names shaped like what RBD and RADOS users store.
var objectNames = []string{
	"foo", "rbd_directory", "rbd_header.10226b8b4567", "rbd_data.10226b8b4567.0000000000000000",
	"rbd_data.10226b8b4567.00000000000003e7", "rbd_id.image-with-a-long-name", "a", "",
	"01234567890", "012345678901", "0123456789012", "journal.ÿþ\x01",
}

func checkObjects(t *testing.T, path string, m *OSDMap, pools []int64) {
	for _, pool := range pools {
		for _, name := range objectNames {
			if name == "" {
				continue // osdmaptool takes an empty argument for "no object"
			}
			want := tool(t, "osdmaptool", path, "--test-map-object", name, "--pool", strconv.FormatInt(pool, 10))
			pg, mp, err := m.MapObject(name, Locator{Pool: pool})
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Appendf(nil, " object '%s' -> %s -> %s\n", name, pg, intList(nil, mp.Acting))
			compareLines(t, fmt.Sprintf("object %q pool %d", name, pool), got, want)
		}
	}
}

func livePath(t *testing.T, name string) string {
	return filepath.Join(corpus.ModuleRoot(t), "rados", "osdmap", "testdata", "live-16.2.15", name)
}

func TestPlacementLiveMaps(t *testing.T) {
	for _, name := range []string{"full.89.bin", "up.89.bin", "full.50.bin", "full.70.bin", "full.11.bin"} {
		t.Run(name, func(t *testing.T) {
			path := livePath(t, name)
			m := readMap(t, path)
			compareLines(t, name, ourDumpAll(m), toolDumpAll(t, path))
		})
	}
	// Every pool of the richest map, object by object.
	path := livePath(t, "up.89.bin")
	m := readMap(t, path)
	checkObjects(t, path, m, []int64{1, 2, 3, 4, 5, 6})
}

func TestApplyLiveChain(t *testing.T) {
	cur := readMap(t, livePath(t, "full.1.bin"))
	checkpoints := map[uint32]string{11: "full.11.bin", 30: "full.30.bin", 50: "full.50.bin",
		70: "full.70.bin", 89: "full.89.bin"}
	for e := 2; e <= 89; e++ {
		raw, err := os.ReadFile(livePath(t, "inc."+strconv.Itoa(e)+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		inc, err := DecodeIncremental(raw)
		if err != nil {
			t.Fatalf("incremental %d: %v", e, err)
		}
		if cur, err = cur.Apply(inc); err != nil {
			t.Fatalf("apply %d: %v", e, err)
		}
		if f, ok := checkpoints[cur.Epoch]; ok {
			for _, diff := range mapDiff(normalize(cur), normalize(readMap(t, livePath(t, f)))) {
				t.Errorf("epoch %d: %s", cur.Epoch, diff)
			}
		}
	}
}

// builtMap makes an OSDMap with osdmaptool: createsimple with a default
// pool, a CRUSH map built by crushtool imported, then osdmaptool passes.
type builtMap struct {
	name    string
	osds    int
	create  string   // extra createsimple arguments
	crush   string   // crushtool --build layers
	text    string   // or a crush map to compile
	tunable string   // crushtool tunable flags
	passes  []string // osdmaptool argument sets, each ending in a write
}

func (b builtMap) build(t *testing.T, dir string) string {
	mp := filepath.Join(dir, "osdmap")
	cp := filepath.Join(dir, "crush")
	tool(t, "osdmaptool", append([]string{"--createsimple", strconv.Itoa(b.osds), "--with-default-pool",
		"--clobber"}, append(strings.Fields(b.create), mp)...)...)
	if b.text != "" {
		src := cp + ".txt"
		if err := os.WriteFile(src, []byte(b.text), 0o644); err != nil {
			t.Fatal(err)
		}
		tool(t, "crushtool", "-c", src, "-o", cp)
	} else {
		tool(t, "crushtool", append([]string{"--build", "--num_osds", strconv.Itoa(b.osds)},
			append(strings.Fields(b.crush), "-o", cp)...)...)
	}
	if b.tunable != "" {
		tool(t, "crushtool", append(append([]string{"-i", cp}, strings.Fields(b.tunable)...), "-o", cp)...)
	}
	tool(t, "osdmaptool", mp, "--import-crush", cp)
	for _, p := range b.passes {
		tool(t, "osdmaptool", append([]string{mp}, strings.Fields(p)...)...)
	}
	return mp
}

const argonautTunables = "--set-choose-local-tries 2 --set-choose-local-fallback-tries 5 " +
	"--set-choose-total-tries 19 --set-chooseleaf-descend-once 0 --set-chooseleaf-vary-r 0 " +
	"--set-chooseleaf-stable 0"

// weightSetCrush has a per-pool weight set: choose_args KEY, a pool id.
// (crushtool cannot compile the default set, -1, from text.)
func weightSetCrush(key string) string {
	return `tunable choose_local_tries 0
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
type 0 osd
type 1 host
type 2 root
host h0 { id -1 alg straw2 hash 0 item osd.0 weight 1.0 item osd.1 weight 1.0 }
host h1 { id -2 alg straw2 hash 0 item osd.2 weight 1.0 item osd.3 weight 1.0 }
host h2 { id -3 alg straw2 hash 0 item osd.4 weight 1.0 item osd.5 weight 1.0 }
root default { id -4 alg straw2 hash 0 item h0 weight 2.0 item h1 weight 2.0 item h2 weight 2.0 }
rule replicated_rule { id 0 type replicated min_size 1 max_size 10 step take default step chooseleaf firstn 0 type host step emit }
choose_args ` + key + ` {
  { bucket_id -4 weight_set [ [ 5.0 1.0 0.5 ] [ 1.0 4.0 1.0 ] [ 1.0 1.0 3.0 ] ] }
  { bucket_id -1 weight_set [ [ 0.2 1.0 ] ] ids [ 17 3 ] }
  { bucket_id -3 weight_set [ [ 1.0 0.0 ] [ 0.0 1.0 ] ] }
}
`
}

func builtMaps() []builtMap {
	return []builtMap{
		{name: "pool-weight-set", osds: 6, text: weightSetCrush("1"),
			passes: []string{"--mark-up-in --adjust-crush-weight 0:1 --save"}},
		{name: "other-pool-weight-set", osds: 6, text: weightSetCrush("7"),
			passes: []string{"--mark-up-in --adjust-crush-weight 0:1 --save"}},
		{name: "straw2-hosts", osds: 8, crush: "host straw2 2 root straw2 0",
			passes: []string{"--mark-up-in --mark-out 3 --adjust-crush-weight 1:2.0,5:0.5 --save"}},
		{name: "uniform-argonaut-upmap", osds: 12, create: "--pg-bits 4 --pgp-bits 3",
			crush: "host uniform 3 root straw2 0", tunable: argonautTunables,
			passes: []string{"--mark-up-in --mark-out 4 --adjust-crush-weight 1:2.0,7:0.3 --save",
				"--upmap /dev/null --upmap-max 40 --save"}},
		{name: "list-tree", osds: 10, create: "--pg-bits 3",
			crush:  "host list 2 rack tree 2 root straw 0",
			passes: []string{"--mark-up-in --adjust-crush-weight 0:3.0,9:0.1 --save"}},
		{name: "down-osds", osds: 9, crush: "host straw2 3 root straw2 0",
			passes: []string{"--mark-up-in --adjust-crush-weight 2:1.5 --save",
				"--mark-out 5 --adjust-crush-weight 2:1.5 --save"}},
		{name: "flat-upmap", osds: 6, create: "--pg-bits 5", crush: "root straw2 0",
			passes: []string{"--mark-up-in --adjust-crush-weight 0:4,1:2 --save",
				"--upmap /dev/null --upmap-max 60 --save"}},
	}
}

func TestPlacementBuiltMaps(t *testing.T) {
	for _, b := range builtMaps() {
		t.Run(b.name, func(t *testing.T) {
			path := b.build(t, t.TempDir())
			m := readMap(t, path)
			compareLines(t, b.name, ourDumpAll(m), toolDumpAll(t, path))
			checkObjects(t, path, m, []int64{1})
		})
	}
}
