package rbd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest"
)

// Interoperability tests against a real cluster, with Ceph's rbd CLI
// (librbd) as the oracle: what purerbd writes, librbd must read the same
// way, and the reverse.

var cluster *radostest.Cluster

func TestMain(m *testing.M) {
	// a dead client's watch expires after 10 s instead of 30 (TestBreakDeadOwnersLock)
	os.Exit(radostest.Main(m, radostest.Options{Conf: map[string]string{"osd_client_watch_timeout": "10"}}, &cluster))
}

var imageSeq atomic.Int64

// imageName returns a fresh image name for a test.
func imageName(t *testing.T) string {
	return fmt.Sprintf("%s-%d", strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()), imageSeq.Add(1))
}

func rbdCLI(t *testing.T, args ...string) []byte {
	t.Helper()
	radostest.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := cluster.Rbd(ctx, args...)
	if err != nil {
		t.Fatalf("rbd %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func rbdInfo(t *testing.T, spec string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rbdCLI(t, "info", "--format", "json", spec), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// rbdExport returns an image's content as librbd reads it.
func rbdExport(t *testing.T, spec string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "export")
	rbdCLI(t, "export", spec, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rbdImport creates an image from data with librbd.
func rbdImport(t *testing.T, data []byte, spec string, args ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "import")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, append(append([]string{"import"}, args...), path, spec)...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openT(t *testing.T, name string, opts OpenOptions) *Image {
	t.Helper()
	img, err := Open(ctxT(t), testPool(t), name, opts)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { _ = img.Close() })
	return img
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func readAll(t *testing.T, img *Image) []byte {
	t.Helper()
	b := make([]byte, img.Size())
	n, err := img.ReadAtContext(ctxT(t), b, 0)
	if err != nil || n != len(b) {
		t.Fatalf("read all: %d %v", n, err)
	}
	return b
}

// checkBothWays closes img after checking that purerbd reads want, then
// that librbd does too (rbd export) and that its object map checks out.
func checkBothWays(t *testing.T, img *Image, spec string, want []byte) {
	t.Helper()
	mustEqual(t, "purerbd read", readAll(t, img), want)
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "rbd export", rbdExport(t, spec), want)
	rbdCLI(t, "object-map", "check", spec)
}

func mustEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: first difference at byte %d (got %#x, want %#x)", what, i, got[i], want[i])
		}
	}
}

// TestCreateMatchesRbdInfo creates images with purerbd and checks that
// librbd describes them exactly as asked.
func TestCreateMatchesRbdInfo(t *testing.T) {
	ctx := ctxT(t)
	cases := []struct {
		opts     CreateOptions
		size     int64
		features []string
		su, sc   float64
	}{
		{CreateOptions{}, 64 << 20, []string{"layering", "exclusive-lock", "object-map", "fast-diff", "deep-flatten"}, 0, 0},
		{CreateOptions{Order: 20, Features: FeatureNone}, 10<<20 + 4096, []string{}, 0, 0},
		{CreateOptions{Order: 16, Features: FeatureLayering, StripeUnit: 4096, StripeCount: 4}, 1 << 20,
			[]string{"layering", "striping"}, 4096, 4},
		{CreateOptions{Features: FeatureLayering | FeatureExclusiveLock | FeatureObjectMap, StripeUnit: 1 << 20, StripeCount: 3}, 40 << 20,
			[]string{"layering", "striping", "exclusive-lock", "object-map"}, 1 << 20, 3},
	}
	for _, c := range cases {
		name := imageName(t)
		if err := Create(ctx, testPool(t), name, c.size, c.opts); err != nil {
			t.Fatalf("create %+v: %v", c.opts, err)
		}
		info := rbdInfo(t, "rbd/"+name)
		order := c.opts.Order
		if order == 0 {
			order = 22
		}
		if info["size"].(float64) != float64(c.size) || info["order"].(float64) != float64(order) {
			t.Errorf("%+v: rbd info %v", c.opts, info)
		}
		got := fmt.Sprint(info["features"])
		if want := fmt.Sprint(c.features); got != want {
			t.Errorf("%+v: features %s, want %s", c.opts, got, want)
		}
		if c.su != 0 && (info["stripe_unit"] != c.su || info["stripe_count"] != c.sc) {
			t.Errorf("%+v: striping %v/%v", c.opts, info["stripe_unit"], info["stripe_count"])
		}
		img := openT(t, name, OpenOptions{ReadOnly: true})
		st, err := img.Stat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info["id"] != st.ID || info["block_name_prefix"] != "rbd_data."+st.ID {
			t.Errorf("id %v / prefix %v, purerbd says %s", info["id"], info["block_name_prefix"], st.ID)
		}
		if c.opts.Features&FeatureObjectMap != 0 || c.opts.Features == 0 {
			rbdCLI(t, "object-map", "check", "rbd/"+name)
		}
	}
	ls := string(rbdCLI(t, "ls"))
	list, err := List(ctx, testPool(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if !strings.Contains(ls, e.Name+"\n") {
			t.Errorf("rbd ls lacks %s", e.Name)
		}
	}
}

// TestCreateHeaderMatchesLibrbd compares the header omap of an image made
// by purerbd with one made by rbd create with the same options.
func TestCreateHeaderMatchesLibrbd(t *testing.T) {
	ctx := ctxT(t)
	a, b := imageName(t), imageName(t)
	if err := Create(ctx, testPool(t), a, 8<<20, CreateOptions{StripeUnit: 65536, StripeCount: 2,
		Features: FeatureLayering | FeatureExclusiveLock | FeatureObjectMap | FeatureFastDiff}); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "create", "--size", "8M", "--stripe-unit", "65536", "--stripe-count", "2",
		"--image-feature", "layering,exclusive-lock,object-map,fast-diff", "rbd/"+b)
	keys := func(name string) string {
		id := rbdInfo(t, "rbd/"+name)["id"].(string)
		out, err := cluster.Rados(ctx, "-p", "rbd", "listomapkeys", "rbd_header."+id)
		if err != nil {
			t.Fatal(err)
		}
		om, err := cluster.Rados(ctx, "-p", "rbd", "stat", "rbd_object_map."+id)
		if err != nil {
			t.Fatal(err)
		}
		return string(out) + strings.SplitN(string(om), "size", 2)[1]
	}
	if ka, kb := keys(a), keys(b); ka != kb {
		t.Errorf("header keys / object map size differ:\npurerbd:\n%s\nlibrbd:\n%s", ka, kb)
	}
}

// TestWriteReadByRbd writes random data at random offsets (crossing
// object and stripe boundaries) and checks rbd export reads the same.
func TestWriteReadByRbd(t *testing.T) {
	for _, opts := range []CreateOptions{
		{Order: 16},
		{Order: 16, Features: FeatureLayering, StripeUnit: 4096, StripeCount: 3},
		{Order: 17, Features: FeatureLayering | FeatureExclusiveLock | FeatureObjectMap | FeatureFastDiff, StripeUnit: 8192, StripeCount: 5},
	} {
		t.Run(fmt.Sprintf("su%d-sc%d", opts.StripeUnit, opts.StripeCount), func(t *testing.T) {
			ctx := ctxT(t)
			name := imageName(t)
			const size = 3<<20 + 12345
			if err := Create(ctx, testPool(t), name, size, opts); err != nil {
				t.Fatal(err)
			}
			// the last case runs behind the write-around cache, which
			// acknowledges frozen writes early without copying them
			var oo OpenOptions
			if opts.StripeCount == 5 {
				oo.WriteAround = WriteAround{MaxDirty: DefaultMaxDirty}
			}
			img := openT(t, name, oo)
			r := rand.New(rand.NewPCG(7, uint64(opts.StripeCount)))
			model := make([]byte, size)
			// every third write sends one frozen buffer again, at
			// offsets that cut it into different pieces each time:
			// the crcs it caches per piece must be the right ones
			fz := rados.Freeze(randBytes(r, 200000))
			for i := 0; i < 40; i++ {
				n := 1 + r.IntN(300000)
				off := r.IntN(size - n)
				p := randBytes(r, n)
				var err error
				if i%3 == 0 {
					p = fz.Bytes()
					off = r.IntN(size - len(p))
					_, err = img.WriteFrozenAt(ctx, fz, int64(off))
				} else {
					_, err = img.WriteAtContext(ctx, p, int64(off))
				}
				if err != nil {
					t.Fatal(err)
				}
				copy(model[off:], p)
			}
			if err := img.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "purerbd read", readAll(t, img), model)
			if err := img.Close(); err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "rbd export", rbdExport(t, "rbd/"+name), model)
			if opts.Features&FeatureObjectMap != 0 {
				rbdCLI(t, "object-map", "check", "rbd/"+name)
			}
		})
	}
}

// TestReadWhatRbdWrote reads images written by rbd import and rbd bench.
func TestReadWhatRbdWrote(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	data := randBytes(r, 5<<20+777)
	copy(data[1<<20:], make([]byte, 1<<20)) // a hole
	name := imageName(t)
	rbdImport(t, data, "rbd/"+name, "--object-size", "1M", "--stripe-unit", "64K", "--stripe-count", "3")
	img := openT(t, name, OpenOptions{ReadOnly: true})
	mustEqual(t, "read of rbd import", readAll(t, img)[:len(data)], data)

	bench := imageName(t)
	rbdCLI(t, "create", "--size", "16M", "rbd/"+bench)
	rbdCLI(t, "bench", "--io-type", "write", "--io-size", "64K", "--io-total", "8M", "--io-pattern", "rand", "rbd/"+bench)
	img2 := openT(t, bench, OpenOptions{ReadOnly: true})
	mustEqual(t, "read of rbd bench", readAll(t, img2), rbdExport(t, "rbd/"+bench))
}

// TestSnapshotsBothWays takes snapshots with purerbd and with rbd and reads
// each with the other.
func TestSnapshotsBothWays(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	const size = 4 << 20
	if err := Create(ctx, testPool(t), name, size, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	v1 := randBytes(r, size)
	img := openSnapT(t, name, OpenOptions{})
	if _, err := img.WriteAtContext(ctx, v1, 0); err != nil {
		t.Fatal(err)
	}
	if err := img.CreateSnapshot(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	v2 := append([]byte(nil), v1...)
	p := randBytes(r, 1<<20+100)
	copy(v2[500000:], p)
	if _, err := img.WriteAtContext(ctx, p, 500000); err != nil {
		t.Fatal(err)
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "rbd export @s1", rbdExport(t, spec+"@s1"), v1)
	mustEqual(t, "rbd export head", rbdExport(t, spec), v2)
	if !strings.Contains(string(rbdCLI(t, "snap", "ls", spec)), "s1") {
		t.Error("rbd snap ls does not show s1")
	}
	// librbd snapshot, then librbd writes: purerbd reads both
	rbdCLI(t, "snap", "create", spec+"@s2")
	v3 := randBytes(r, 1<<20)
	rbdImportAt(t, spec, v3)
	s2 := openT(t, name, OpenOptions{Snapshot: "s2"})
	mustEqual(t, "purerbd read @s2", readAll(t, s2), v2)
	head := openT(t, name, OpenOptions{ReadOnly: true})
	mustEqual(t, "purerbd read head", readAll(t, head), rbdExport(t, spec))
	snaps, err := head.Snapshots(ctx)
	if err != nil || len(snaps) != 2 {
		t.Fatalf("snapshots %+v %v", snaps, err)
	}
	// remove: purerbd refuses while snapshots exist, rbd removes ours
	if err := Remove(ctx, testPool(t), name, RemoveOptions{Force: true}); !errors.Is(err, ErrHasSnapshots) {
		t.Errorf("remove with snapshots: %v", err)
	}
	rbdCLI(t, "snap", "rm", spec+"@s1")
	w := openSnapT(t, name, OpenOptions{})
	if err := w.RemoveSnapshot(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	_ = s2.Close()
	_ = head.Close()
	if out := rbdCLI(t, "snap", "ls", spec); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("snapshots left: %s", out)
	}
	if err := removeSnapT(t, name); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rbdCLI(t, "ls")), name+"\n") {
		t.Error("removed image still listed")
	}
}

// rbdImportAt writes p at offset 0 of an existing image through librbd,
// feeding `rbd import-diff` a diff stream (format v1: header, one write
// record, end record).
func rbdImportAt(t *testing.T, spec string, p []byte) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("rbd diff v1\n")
	b.WriteByte('w')
	le := func(v uint64) {
		var x [8]byte
		for i := range x {
			x[i] = byte(v >> (8 * i))
		}
		b.Write(x[:])
	}
	le(0)
	le(uint64(len(p)))
	b.Write(p)
	b.WriteByte('e')
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cluster.ToolInput(ctx, b.Bytes(), "rbd", "import-diff", "-", spec); err != nil {
		t.Fatalf("rbd import-diff: %v", err)
	}
}

// TestObjectMapCheck writes, discards, resizes with purerbd on an
// object-map image and asks librbd to check the map.
func TestObjectMapCheck(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	if err := Create(ctx, testPool(t), name, 8<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	r := rand.New(rand.NewPCG(9, 9))
	model := make([]byte, 8<<20)
	for i := 0; i < 10; i++ {
		off := r.IntN(7 << 20)
		p := randBytes(r, 300000)
		copy(model[off:], p)
		if _, err := img.WriteAtContext(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := img.Discard(ctx, 1<<20, 2<<20); err != nil { // two whole objects
		t.Fatal(err)
	}
	clear(model[1<<20 : 3<<20])
	if err := img.Discard(ctx, 5<<20+1000, 1<<20); err != nil { // tail + head
		t.Fatal(err)
	}
	clear(model[5<<20+1000 : 6<<20+1000])
	p := randBytes(r, 100)
	copy(model[7<<20:], p)
	if _, err := img.WriteAtContext(ctx, p, 7<<20); err != nil {
		t.Fatal(err)
	}
	if err := img.Resize(ctx, 6<<20+500); err != nil {
		t.Fatal(err)
	}
	model = model[:6<<20+500]
	if err := img.Resize(ctx, 9<<20); err != nil {
		t.Fatal(err)
	}
	model = append(model, make([]byte, 9<<20-len(model))...)
	mustEqual(t, "purerbd read", readAll(t, img), model)
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "object-map", "check", spec)
	mustEqual(t, "rbd export", rbdExport(t, spec), model)
	if info := rbdInfo(t, spec); fmt.Sprint(info["flags"]) != "[]" {
		t.Errorf("flags after purerbd: %v", info["flags"])
	}
	if out := rbdCLI(t, "lock", "ls", spec); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("lock left after close: %s", out)
	}
}

// TestExclusiveLockHandover writes with purerbd while rbd bench writes to
// the same image: the lock goes back and forth, nothing is lost.
func TestExclusiveLockHandover(t *testing.T) {
	t.Run("writethrough", func(t *testing.T) { testExclusiveLockHandover(t, WriteAround{}) })
	// the lock goes only once every write the cache acknowledged landed
	t.Run("write-around", func(t *testing.T) { testExclusiveLockHandover(t, WriteAround{MaxDirty: DefaultMaxDirty}) })
}

func testExclusiveLockHandover(t *testing.T, wa WriteAround) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	const size = 16 << 20
	if err := Create(ctx, testPool(t), name, size, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{WriteAround: wa})
	r := rand.New(rand.NewPCG(1, 1))
	mine := make([]byte, 8<<20) // purerbd owns [8M,16M), bench writes [0,4M)
	if _, err := img.WriteAtContext(ctx, mine, 8<<20); err != nil {
		t.Fatal(err)
	}
	if !img.IsLockOwner() {
		t.Fatal("no lock after a write")
	}
	done := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := cluster.Rbd(cctx, "bench", "--io-type", "write", "--io-size", "64K", "--io-threads", "1", "--io-total", "4M", spec)
		done <- err
	}()
	writes := 0
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("rbd bench: %v", err)
			}
			finished = true
		default:
		}
		off := r.IntN(len(mine) - 65536)
		p := randBytes(r, 65536)
		copy(mine[off:], p)
		if _, err := img.WriteAtContext(ctx, p, int64(8<<20+off)); err != nil {
			t.Fatal(err)
		}
		writes++
	}
	t.Logf("purerbd wrote %d times while rbd bench ran; lock acquired %d times, released %d times",
		writes, img.lock.acquisitions.Load(), img.lock.releases.Load())
	if img.lock.releases.Load() < 1 || img.lock.acquisitions.Load() < 2 {
		t.Error("the lock never went to rbd bench and back")
	}
	got := make([]byte, len(mine))
	if _, err := img.ReadAtContext(ctx, got, 8<<20); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "purerbd's region (purerbd read)", got, mine)
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	exp := rbdExport(t, spec)
	mustEqual(t, "purerbd's region (rbd export)", exp[8<<20:], mine)
	if bytes.Equal(exp[:4<<20], make([]byte, 4<<20)) {
		t.Error("rbd bench's writes are missing")
	}
	rbdCLI(t, "object-map", "check", spec)
	if out := rbdCLI(t, "lock", "ls", spec); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("lock left after close: %s", out)
	}
}

// TestLockRefuse keeps the lock from librbd.
func TestLockRefuse(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	if err := Create(ctx, testPool(t), name, 4<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{LockPolicy: LockRefuse})
	if !img.IsLockOwner() {
		t.Fatal("LockRefuse did not take the lock at open")
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cluster.Rbd(cctx, "bench", "--io-type", "write", "--io-total", "64K", "rbd/"+name); err == nil {
		t.Error("rbd bench wrote to an image held with LockRefuse")
	}
	if !img.IsLockOwner() {
		t.Error("lock lost")
	}
}

// TestUnsupportedFeatureRefused opens a journaling image.
func TestUnsupportedFeatureRefused(t *testing.T) {
	name := imageName(t)
	rbdCLI(t, "create", "--size", "4M", "--image-feature", "layering,exclusive-lock,journaling", "rbd/"+name)
	_, err := Open(ctxT(t), testPool(t), name, OpenOptions{})
	var fe *FeatureError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "journaling") {
		t.Fatalf("read-write open of a journaling image: %v", err)
	}
	img := openT(t, name, OpenOptions{ReadOnly: true})
	if img.Size() != 4<<20 {
		t.Error("read-only open")
	}
}

// TestMetadataRenameResize covers the smaller verbs against rbd.
func TestMetadataRenameResize(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	if err := Create(ctx, testPool(t), name, 4<<20, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	if err := img.MetadataSet(ctx, "conf_rbd_cache", "false"); err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimSpace(string(rbdCLI(t, "image-meta", "get", spec, "conf_rbd_cache"))); v != "false" {
		t.Errorf("rbd image-meta get: %q", v)
	}
	rbdCLI(t, "image-meta", "set", spec, "owner", "alice")
	if v, err := img.MetadataGet(ctx, "owner"); err != nil || v != "alice" {
		t.Errorf("metadata get: %q %v", v, err)
	}
	if err := img.Resize(ctx, 12<<20); err != nil {
		t.Fatal(err)
	}
	if s := rbdInfo(t, spec)["size"].(float64); s != 12<<20 {
		t.Errorf("rbd info size after resize %v", s)
	}
	rbdCLI(t, "resize", "--size", "20M", spec)
	if err := img.Refresh(ctx); err != nil || img.Size() != 20<<20 {
		t.Errorf("size after rbd resize: %d %v", img.Size(), err)
	}
	_ = img.Close()
	renamed := name + "-renamed"
	if err := Rename(ctx, testPool(t), name, renamed); err != nil {
		t.Fatal(err)
	}
	if rbdInfo(t, "rbd/"+renamed)["size"].(float64) != 20<<20 {
		t.Error("renamed image")
	}
	if err := Remove(ctx, testPool(t), renamed, RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestClones clones both ways and flattens.
func TestClones(t *testing.T) {
	ctx := ctxT(t)
	parent := imageName(t)
	r := rand.New(rand.NewPCG(11, 12))
	data := randBytes(r, 3<<20)
	rbdImport(t, data, "rbd/"+parent, "--object-size", "1M")
	rbdCLI(t, "snap", "create", "rbd/"+parent+"@base")
	rbdCLI(t, "snap", "protect", "rbd/"+parent+"@base")

	// purerbd clones librbd's parent; librbd reads the clone
	child := imageName(t)
	if err := Clone(ctx, testPool(t), parent, "base", testPool(t), child, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "rbd export of purerbd clone", rbdExport(t, "rbd/"+child), data)
	if !strings.Contains(string(rbdCLI(t, "children", "rbd/"+parent+"@base")), child) {
		t.Error("rbd children does not list the clone")
	}
	img := openT(t, child, OpenOptions{})
	p := randBytes(r, 5000)
	if _, err := img.WriteAtContext(ctx, p, 1<<20-100); err != nil { // copy-up of two objects
		t.Fatal(err)
	}
	want := append([]byte(nil), data...)
	copy(want[1<<20-100:], p)
	mustEqual(t, "purerbd read of clone", readAll(t, img), want)
	mustEqual(t, "rbd export after copy-up", rbdExport(t, "rbd/"+child), want)
	if err := img.Flatten(ctx); err != nil {
		t.Fatal(err)
	}
	_ = img.Close()
	if _, ok := rbdInfo(t, "rbd/"+child)["parent"]; ok {
		t.Error("flattened clone still has a parent")
	}
	mustEqual(t, "rbd export after flatten", rbdExport(t, "rbd/"+child), want)
	rbdCLI(t, "object-map", "check", "rbd/"+child)

	// librbd clones; purerbd reads the clone
	child2 := imageName(t)
	rbdCLI(t, "clone", "rbd/"+parent+"@base", "rbd/"+child2)
	c2 := openT(t, child2, OpenOptions{ReadOnly: true})
	mustEqual(t, "purerbd read of rbd clone", readAll(t, c2), data)
}

// TestSnapshotObjectMaps takes snapshots with purerbd on an object-map,
// fast-diff image, writes, shrinks and rolls back, and asks librbd to
// check every map.
func TestSnapshotObjectMaps(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	if err := Create(ctx, testPool(t), name, 6<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	img := openSnapT(t, name, OpenOptions{})
	r := rand.New(rand.NewPCG(13, 14))
	v1 := randBytes(r, 6<<20)
	clear(v1[2<<20 : 3<<20])
	if _, err := img.WriteAtContext(ctx, v1[:2<<20], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := img.WriteAtContext(ctx, v1[3<<20:], 3<<20); err != nil {
		t.Fatal(err)
	}
	if err := img.CreateSnapshot(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	p := randBytes(r, 10)
	if _, err := img.WriteAtContext(ctx, p, 4<<20+5); err != nil {
		t.Fatal(err)
	}
	if err := img.Discard(ctx, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := img.CreateSnapshot(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := img.Resize(ctx, 3<<20); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{spec, spec + "@a", spec + "@b"} {
		rbdCLI(t, "object-map", "check", s)
	}
	mustEqual(t, "rbd export @a", rbdExport(t, spec+"@a"), v1)
	if err := img.RemoveSnapshot(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "object-map", "check", spec)
	rbdCLI(t, "object-map", "check", spec+"@a")
	if err := img.RollbackSnapshot(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	checkBothWays(t, img, spec, v1)
	if info := rbdInfo(t, spec); fmt.Sprint(info["flags"]) != "[]" {
		t.Errorf("flags: %v", info["flags"])
	}
}

// TestDataPoolAndNamespace puts data objects in a separate pool and an
// image in a namespace, and checks librbd agrees on both.
func TestDataPoolAndNamespace(t *testing.T) {
	radostest.SkipShort(t)
	ctx := ctxT(t)
	if _, err := cluster.Ceph(ctx, "osd", "pool", "create", "rbddata", "8"); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Rbd(ctx, "pool", "init", "rbddata"); err != nil {
		t.Fatal(err)
	}
	name := imageName(t)
	if err := Create(ctx, testPool(t), name, 3<<20, CreateOptions{Order: 20, DataPool: "rbddata"}); err != nil {
		t.Fatal(err)
	}
	info := rbdInfo(t, "rbd/"+name)
	if info["data_pool"] != "rbddata" || !strings.Contains(fmt.Sprint(info["features"]), "data-pool") {
		t.Errorf("rbd info: data_pool %v features %v", info["data_pool"], info["features"])
	}
	img := openT(t, name, OpenOptions{})
	data := randBytes(rand.New(rand.NewPCG(21, 22)), 3<<20)
	if _, err := img.WriteAtContext(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	_ = img.Close()
	mustEqual(t, "rbd export (data pool)", rbdExport(t, "rbd/"+name), data)
	out, err := cluster.Rados(ctx, "-p", "rbddata", "ls")
	if err != nil || !strings.Contains(string(out), "rbd_data."+info["id"].(string)) {
		t.Errorf("data objects not in the data pool: %s %v", out, err)
	}
	rbdCLI(t, "object-map", "check", "rbd/"+name)
	if err := Remove(ctx, testPool(t), name, RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, _ := cluster.Rados(ctx, "-p", "rbddata", "ls"); strings.Contains(string(out), "rbd_data."+info["id"].(string)) {
		t.Errorf("data objects left after removal: %s", out)
	}

	rbdCLI(t, "namespace", "create", "rbd/ns1")
	nsio := testPool(t).WithNamespace("ns1")
	nsName := imageName(t)
	if err := Create(ctx, nsio, nsName, 1<<20, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rbdCLI(t, "ls", "rbd/ns1")), nsName) {
		t.Error("rbd ls rbd/ns1 lacks the image")
	}
	nimg, err := Open(ctx, nsio, nsName, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nimg.WriteAtContext(ctx, data[:1<<20], 0); err != nil {
		t.Fatal(err)
	}
	_ = nimg.Close()
	mustEqual(t, "rbd export (namespace)", rbdExport(t, "rbd/ns1/"+nsName), data[:1<<20])
}

// TestWritesKeepLibrbdSnapshots writes with purerbd after librbd took
// snapshots: the snapshots keep their data (the snap context is right),
// purerbd reads them, protects, rolls back.
func TestWritesKeepLibrbdSnapshots(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	r := rand.New(rand.NewPCG(31, 32))
	v1 := randBytes(r, 3<<20)
	rbdImport(t, v1, spec, "--object-size", "1M")
	rbdCLI(t, "snap", "create", spec+"@one")

	img := openT(t, name, OpenOptions{})
	v2 := append([]byte(nil), v1...)
	p := randBytes(r, 1<<20+10)
	copy(v2[700000:], p)
	if _, err := img.WriteAtContext(ctx, p, 700000); err != nil {
		t.Fatal(err)
	}
	if err := img.Discard(ctx, 2<<20, 1<<20); err != nil {
		t.Fatal(err)
	}
	clear(v2[2<<20:])
	mustEqual(t, "rbd export @one", rbdExport(t, spec+"@one"), v1)
	mustEqual(t, "rbd export head", rbdExport(t, spec), v2)
	rbdCLI(t, "object-map", "check", spec+"@one")

	s := openT(t, name, OpenOptions{Snapshot: "one"})
	mustEqual(t, "purerbd read @one", readAll(t, s), v1)
	if _, err := s.WriteAtContext(ctx, []byte{1}, 0); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write to a snapshot: %v", err)
	}

	if err := img.ProtectSnapshot(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rbdCLI(t, "snap", "ls", spec)), "yes") {
		t.Error("rbd snap ls does not show the protection")
	}
	if err := img.UnprotectSnapshot(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if err := img.RollbackSnapshot(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	checkBothWays(t, img, spec, v1)
}

// TestBreakDeadOwnersLock: a client holding the lock disappears; the next
// writer blocklists it, breaks the lock and writes.
func TestBreakDeadOwnersLock(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	if err := Create(ctx, testPool(t), name, 4<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	other, _ := lockOnOtherClient(t, ctx, name)
	_ = other.Close() // gone without unlocking: its watch disappears, the lock stays
	if out := rbdCLI(t, "lock", "ls", "rbd/"+name); !strings.Contains(string(out), "auto ") {
		t.Fatalf("no lock left by the dead client: %s", out)
	}
	img := openT(t, name, OpenOptions{})
	if _, err := img.WriteAtContext(ctx, []byte("second"), 0); err != nil {
		t.Fatal(err)
	}
	if !img.IsLockOwner() {
		t.Fatal("lock not taken over")
	}
	if out := string(rbdCLI(t, "lock", "ls", "rbd/"+name)); !strings.Contains(out, fmt.Sprintf("client.%d", conn.InstanceID())) {
		t.Errorf("rbd lock ls after takeover: %s", out)
	}
	bl, err := cluster.Ceph(ctx, "osd", "blocklist", "ls")
	if err != nil || !strings.Contains(string(bl), "127.0.0.1") {
		t.Errorf("dead owner not blocklisted: %s %v", bl, err)
	}
	_ = img.Close()
	got := make([]byte, 6)
	r := openT(t, name, OpenOptions{ReadOnly: true})
	if _, err := r.ReadAtContext(ctx, got, 0); err != nil || string(got) != "second" {
		t.Errorf("read %q %v", got, err)
	}
}

// TestSnapshotTrash removes a snapshot that still has clone v2 children:
// it goes to the snapshot trash, as librbd does, and librbd finishes the
// job when the last clone is gone.
func TestSnapshotTrash(t *testing.T) {
	ctx := ctxT(t)
	parent := imageName(t)
	pspec := "rbd/" + parent
	data := randBytes(rand.New(rand.NewPCG(41, 42)), 2<<20)
	rbdImport(t, data, pspec, "--object-size", "1M")
	rbdCLI(t, "snap", "create", pspec+"@s")
	c1, c2 := imageName(t), imageName(t)
	for _, c := range []string{c1, c2} {
		if err := Clone(ctx, testPool(t), parent, "s", testPool(t), c, CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	img := openT(t, parent, OpenOptions{})
	if err := img.RemoveSnapshot(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	_ = img.Close()
	if out := string(rbdCLI(t, "snap", "ls", pspec)); strings.Contains(out, " s ") {
		t.Errorf("snapshot still listed: %s", out)
	}
	if out := string(rbdCLI(t, "snap", "ls", "--all", pspec)); !strings.Contains(out, "trash") {
		t.Errorf("snapshot not in the trash: %s", out)
	}
	mustEqual(t, "clone still reads its parent", rbdExport(t, "rbd/"+c1), data)
	if err := Remove(ctx, testPool(t), c1, RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "rm", "rbd/"+c2) // librbd removes the trashed snapshot with its last clone
	if out := string(rbdCLI(t, "snap", "ls", "--all", pspec)); strings.TrimSpace(out) != "" {
		t.Errorf("trashed snapshot left: %s", out)
	}
}

// TestRbdSnapshotWhileLocked: librbd takes a snapshot while purerbd holds
// the lock (it asks for the lock, purerbd hands it over), and purerbd's
// next writes carry the new snapshot context.
func TestRbdSnapshotWhileLocked(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	if err := Create(ctx, testPool(t), name, 2<<20, CreateOptions{Order: 20}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	r := rand.New(rand.NewPCG(51, 52))
	v1 := randBytes(r, 2<<20)
	if _, err := img.WriteAtContext(ctx, v1, 0); err != nil {
		t.Fatal(err)
	}
	rbdCLI(t, "snap", "create", spec+"@while-locked")
	v2 := randBytes(r, 2<<20)
	if _, err := img.WriteAtContext(ctx, v2, 0); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "rbd export @while-locked", rbdExport(t, spec+"@while-locked"), v1)
	mustEqual(t, "purerbd head", readAll(t, img), v2)
	_ = img.Close()
	mustEqual(t, "rbd export head", rbdExport(t, spec), v2)
	rbdCLI(t, "object-map", "check", spec)
	rbdCLI(t, "object-map", "check", spec+"@while-locked")
}

// TestConcurrentIO hammers one image from many goroutines (writes,
// discards and reads of overlapping objects, each goroutine on its own
// byte range) and checks the result with librbd and the object map.
func TestConcurrentIO(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	const size = 8 << 20
	if err := Create(ctx, testPool(t), name, size, CreateOptions{Order: 18, StripeUnit: 16384, StripeCount: 4,
		Features: FeatureLayering | FeatureStripingV2 | FeatureExclusiveLock | FeatureObjectMap | FeatureFastDiff}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	model := make([]byte, size)
	const workers = 16
	span := size / workers
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			r := rand.New(rand.NewPCG(uint64(w), 77))
			base := w * span
			for i := 0; i < 30; i++ {
				off := base + r.IntN(span-70000)
				n := 1 + r.IntN(70000)
				switch r.IntN(4) {
				case 0:
					if err := img.Discard(ctx, int64(off), int64(n)); err != nil {
						errc <- err
						return
					}
					clear(model[off : off+n])
				case 1:
					got := make([]byte, n)
					if _, err := img.ReadAtContext(ctx, got, int64(off)); err != nil {
						errc <- err
						return
					}
					if !bytes.Equal(got, model[off:off+n]) {
						errc <- fmt.Errorf("worker %d: read at %d differs from what it wrote", w, off)
						return
					}
				default:
					p := randBytes(r, n)
					if _, err := img.WriteAtContext(ctx, p, int64(off)); err != nil {
						errc <- err
						return
					}
					copy(model[off:], p)
				}
			}
			errc <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	checkBothWays(t, img, spec, model)
}

// TestNotifySize sees size changes made by purerbd and by rbd resize.
func TestNotifySize(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	if err := Create(ctx, testPool(t), name, 4<<20, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	img := openT(t, name, OpenOptions{})
	sizes := make(chan int64, 4)
	cancel := img.NotifySize(func(s int64) { sizes <- s })
	defer cancel()
	wait := func(want int64) {
		t.Helper()
		select {
		case got := <-sizes:
			if got != want {
				t.Fatalf("size notification %d, want %d", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no size notification for %d", want)
		}
	}
	if err := img.Resize(ctx, 8<<20); err != nil {
		t.Fatal(err)
	}
	wait(8 << 20)
	rbdCLI(t, "resize", "--size", "16M", "rbd/"+name)
	wait(16 << 20)
	if img.Size() != 16<<20 {
		t.Errorf("Size() = %d", img.Size())
	}
}

// lockOnOtherClient opens image name on a second client of its own,
// which takes the exclusive lock by writing "first" at offset 0.
func lockOnOtherClient(t *testing.T, ctx context.Context, name string) (*rados.Conn, *Image) {
	t.Helper()
	other, err := rados.Connect(ctx, rados.Config{MonHost: strings.Join(cluster.MonAddrs, ","), Key: cluster.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	oio, err := other.IOContext(ctx, cluster.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	img, err := Open(ctx, oio, name, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := img.WriteAtContext(ctx, []byte("first"), 0); err != nil {
		t.Fatal(err)
	}
	return other, img
}
