package rados

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestObjectsInteropWithRadosCLI: objects of 0 B to 64 MiB written here,
// copied into the socket or spliced (SpliceWrites), read back
// byte-identical with `rados get`, and the reverse with `rados put`.
func TestObjectsInteropWithRadosCLI(t *testing.T) {
	t.Run("spliced", func(t *testing.T) {
		io := testIO(t, connectTestConfig(t, Config{SpliceWrites: true}), "")
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		for i, size := range []int{0, 4096, 1<<20 + 7, 4 << 20, 64 << 20} {
			// starting mid-page: large data goes to the socket by
			// reference (msgr SpliceData), whole pages at a time
			data := randomBytes(uint64(i), size+5)[5:]
			oid := fmt.Sprintf("interop-spliced-%d", size)
			if err := io.WriteFull(ctx, oid, data); err != nil {
				t.Fatalf("WriteFull %d bytes: %v", size, err)
			}
			out := filepath.Join(t.TempDir(), oid)
			if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "get", oid, out); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
				t.Fatalf("%d bytes spliced here, rados get returned %d differing bytes", size, len(got))
			}
		}
	})
	conn := connectTest(t)
	io := testIO(t, conn, "")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	for i, size := range []int{0, 1, 4095, 4096, 1<<20 + 7, 4 << 20, 64 << 20} {
		data := randomBytes(uint64(i), size+5)[5:]
		// purerbd -> rados
		oid := fmt.Sprintf("interop-ours-%d", size)
		if err := io.WriteFull(ctx, oid, data); err != nil {
			t.Fatalf("WriteFull %d bytes: %v", size, err)
		}
		out := filepath.Join(dir, oid)
		if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "get", oid, out); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes written here, rados get returned %d differing bytes", size, len(got))
		}
		// rados -> purerbd
		oid = fmt.Sprintf("interop-cli-%d", size)
		// `rados put` of an empty file onto the object a previous run
		// (-count) left does not change its mtime: start afresh
		if err := io.Remove(ctx, oid); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		in := filepath.Join(dir, oid)
		if err := os.WriteFile(in, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "put", oid, in); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(ctx, oid)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%d bytes put by rados, read %d differing bytes here", size, len(got))
		}
		st, err := io.Stat(ctx, oid)
		if err != nil || st.Size != uint64(size) || time.Since(st.ModTime) > time.Minute {
			t.Fatalf("stat: %+v %v", st, err)
		}
	}
	// partial reads, writes at offsets, append, truncate, zero
	const oid = "interop-edit"
	steps := []func() error{
		func() error { return io.WriteFull(ctx, oid, []byte("0123456789")) },
		func() error { return io.Write(ctx, oid, []byte("abc"), 3) },
		func() error { return io.Append(ctx, oid, []byte("XYZ")) },
		func() error { return io.Zero(ctx, oid, 0, 2) },
		func() error { return io.Truncate(ctx, oid, 12) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			t.Fatal(err)
		}
	}
	want := []byte("\x00\x002abc6789XY")
	out, err := cluster.Rados(ctx, "-p", cluster.Pool, "get", oid, "-")
	if err != nil || !bytes.Equal(out, want) {
		t.Fatalf("rados get: %q %v, want %q", out, err, want)
	}
	p := make([]byte, 5)
	if n, err := io.Read(ctx, oid, p, 9); err != nil || n != 3 || string(p[:n]) != "9XY" {
		t.Fatalf("short read at the end: %d %q %v", n, p[:n], err)
	}
	if n, err := io.Read(ctx, oid, p, 100); err != nil || n != 0 {
		t.Fatalf("read beyond the end: %d %v", n, err)
	}
	if err := io.Remove(ctx, oid); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Stat(ctx, oid); !errors.Is(err, ErrNotFound) {
		t.Fatalf("stat of a removed object: %v", err)
	}
}

func TestXattrsInteropWithRadosCLI(t *testing.T) {
	conn := connectTest(t)
	io := testIO(t, conn, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const oid = "xattr-obj"
	bin := []byte{0, 1, 2, 0xff, '\n'}
	if err := io.SetXattr(ctx, oid, "user.bin", bin); err != nil {
		t.Fatal(err)
	}
	out, err := cluster.Rados(ctx, "-p", cluster.Pool, "getxattr", oid, "user.bin")
	if err != nil || !bytes.Equal(out, bin) {
		t.Fatalf("rados getxattr: %q %v", out, err)
	}
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "setxattr", oid, "from-cli", "value-cli"); err != nil {
		t.Fatal(err)
	}
	if v, err := io.GetXattr(ctx, oid, "from-cli"); err != nil || string(v) != "value-cli" {
		t.Fatalf("GetXattr: %q %v", v, err)
	}
	xs, err := io.ListXattrs(ctx, oid)
	if err != nil {
		t.Fatal(err)
	}
	out, err = cluster.Rados(ctx, "-p", cluster.Pool, "listxattr", oid)
	if err != nil {
		t.Fatal(err)
	}
	cli := strings.Fields(string(out))
	var ours []string
	for k := range xs {
		ours = append(ours, k)
	}
	slices.Sort(cli)
	slices.Sort(ours)
	if !slices.Equal(cli, ours) {
		t.Fatalf("xattrs: ours %v, rados %v", ours, cli)
	}
	if err := io.RmXattr(ctx, oid, "from-cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.GetXattr(ctx, oid, "from-cli"); !errors.Is(err, ErrNoData) {
		t.Fatalf("removed xattr: %v, want ErrNoData", err)
	}
}

// TestOmapInteropWithRadosCLI: thousands of keys, read back in pages.
func TestOmapInteropWithRadosCLI(t *testing.T) {
	conn := connectTest(t)
	io := testIO(t, conn, "omap-ns")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const oid = "omap-obj"
	const n = 3000
	want := map[string][]byte{}
	batch := map[string][]byte{}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key-%05d", i)
		want[k] = randomBytes(uint64(i), i%50)
		batch[k] = want[k]
		if len(batch) == 500 {
			if err := io.OmapSet(ctx, oid, batch); err != nil {
				t.Fatal(err)
			}
			batch = map[string][]byte{}
		}
	}
	if err := io.OmapSetHeader(ctx, oid, []byte("the header")); err != nil {
		t.Fatal(err)
	}
	// the CLI sees every key
	out, err := cluster.Rados(ctx, "-p", cluster.Pool, "-N", "omap-ns", "listomapkeys", oid)
	if err != nil {
		t.Fatal(err)
	}
	if keys := strings.Fields(string(out)); len(keys) != n {
		t.Fatalf("rados listomapkeys: %d keys, want %d", len(keys), n)
	}
	val := filepath.Join(t.TempDir(), "val")
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "-N", "omap-ns", "getomapval", oid, "key-01234", val); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(val); !bytes.Equal(got, want["key-01234"]) {
		t.Fatalf("rados getomapval: %q", got)
	}
	// and the other way
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "-N", "omap-ns", "setomapval", oid, "cli-key", "cli-value"); err != nil {
		t.Fatal(err)
	}
	want["cli-key"] = []byte("cli-value")
	// pages of 1000 through the iterator, in key order
	var keys []string
	for kv, err := range io.Omap(ctx, oid, "") {
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(kv.Value, want[kv.Key]) {
			t.Fatalf("key %s: value differs", kv.Key)
		}
		keys = append(keys, kv.Key)
	}
	if len(keys) != len(want) || !slices.IsSorted(keys) {
		t.Fatalf("iterated %d keys (sorted %v), want %d", len(keys), slices.IsSorted(keys), len(want))
	}
	// explicit pagination with a prefix
	kvs, more, err := io.OmapGetVals(ctx, oid, "key-00099", "key-001", 50)
	if err != nil || len(kvs) != 50 || !more || kvs[0].Key != "key-00100" {
		t.Fatalf("OmapGetVals page: %d entries, more %v, first %v, %v", len(kvs), more, kvs[0].Key, err)
	}
	ks, more, err := io.OmapGetKeys(ctx, oid, "key-02990", 100)
	if err != nil || len(ks) != 9 || more {
		t.Fatalf("OmapGetKeys tail: %v %v %v", ks, more, err)
	}
	byKeys, err := io.OmapGetValsByKeys(ctx, oid, []string{"cli-key", "absent"})
	if err != nil || len(byKeys) != 1 || string(byKeys["cli-key"]) != "cli-value" {
		t.Fatalf("OmapGetValsByKeys: %v %v", byKeys, err)
	}
	if h, err := io.OmapGetHeader(ctx, oid); err != nil || string(h) != "the header" {
		t.Fatalf("header: %q %v", h, err)
	}
	if err := io.OmapRm(ctx, oid, []string{"cli-key", "key-00000"}); err != nil {
		t.Fatal(err)
	}
	all, err := io.OmapGetAll(ctx, oid, "")
	if err != nil || len(all) != n-1 {
		t.Fatalf("after rm: %d keys, %v", len(all), err)
	}
	if err := io.OmapClear(ctx, oid); err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Rados(ctx, "-p", cluster.Pool, "-N", "omap-ns", "listomapkeys", oid); err != nil || len(out) != 0 {
		t.Fatalf("after clear, rados lists %q %v", out, err)
	}
}

// TestLocateMatchesCephOSDMap compares object placement with
// `ceph osd map`.
func TestLocateMatchesCephOSDMap(t *testing.T) {
	conn := connectTest(t)
	// ten runs of the ceph CLI (a Python program): on a loaded machine
	// each may take several seconds
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, ns := range []string{"", "some-ns"} {
		io := testIO(t, conn, ns)
		for i := 0; i < 5; i++ { // each `ceph osd map` takes a while
			oid := fmt.Sprintf("rbd_data.%x.%016x", 0xabc+i, i*7)
			loc, err := io.Locate(oid)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"osd", "map", cluster.Pool, oid, "-f", "json"}
			if ns != "" {
				args = append(args, ns)
			}
			out, err := cluster.Ceph(ctx, args...)
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				PGID          string  `json:"pgid"`
				RawPGID       string  `json:"raw_pgid"`
				Up            []int32 `json:"up"`
				UpPrimary     int32   `json:"up_primary"`
				Acting        []int32 `json:"acting"`
				ActingPrimary int32   `json:"acting_primary"`
			}
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			raw := strconv.FormatInt(io.Pool(), 10) + "." + strconv.FormatUint(uint64(loc.RawPG.Seed), 16)
			if m.PGID != loc.PG.String() || m.RawPGID != raw || !slices.Equal(m.Up, loc.Up) ||
				!slices.Equal(m.Acting, loc.Acting) || m.UpPrimary != loc.UpPrimary || m.ActingPrimary != loc.ActingPrimary {
				t.Errorf("%s/%s: ours %s raw %s %+v; ceph osd map %s", ns, oid, loc.PG, raw, loc.Mapping, out)
			}
		}
	}
}
