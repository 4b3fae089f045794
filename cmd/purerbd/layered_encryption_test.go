package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/syncbuf"
	"github.com/purerbd/purerbd/nbd/nbdtest"
	"github.com/purerbd/purerbd/rados/radostest"
	"github.com/purerbd/purerbd/rbd/luks"
)

// Layered encryption (Ceph 17 and later) against librbd on a Reef
// cluster, both ways: a parent formatted and written by librbd, clones
// formatted with keys of their own by Reef's rbd and by purerbd, read
// and written through `purerbd nbd serve` with one spec a layer and
// through librbd's rbd_encryption_load2 (the root's python3 rbd
// binding); flatten by each side, read afterwards by the other with the
// clone's spec alone; a clone that inherits its parent's encryption; and
// refusals.

// layeredOracle is librbd's side: a python3 program of the cluster's
// release that opens an image with encryption_load2 (specs, the image's
// first) and runs ops on it in order: ["write", off, len, byte] (byte 0
// writes zeroes with write_zeroes), ["read", path] (the whole plaintext
// into a file), ["flatten"], ["format", format, passfile] (without
// specs: rbd encryption format's call), ["size"] (printed).
const layeredOracle = `
import json, sys, rados, rbd
a = json.loads(sys.argv[1])
F = {"luks1": rbd.RBD_ENCRYPTION_FORMAT_LUKS1, "luks2": rbd.RBD_ENCRYPTION_FORMAT_LUKS2, "luks": rbd.RBD_ENCRYPTION_FORMAT_LUKS}
def pw(p):
    with open(p, "rb") as f:
        return f.read()
with rados.Rados(conffile=a["conf"]) as cl:
    with cl.open_ioctx("rbd") as io:
        with rbd.Image(io, a["image"]) as img:
            if a["specs"]:
                img.encryption_load2(tuple((F[f], pw(p)) for f, p in a["specs"]))
            for op in a["ops"]:
                if op[0] == "write":
                    if op[3] == 0:
                        img.write_zeroes(op[1], op[2])
                    else:
                        img.write(bytes([op[3]]) * op[2], op[1])
                elif op[0] == "read":
                    n = img.size()
                    with open(op[1], "wb") as f:
                        off = 0
                        while off < n:
                            k = min(1 << 22, n - off)
                            f.write(img.read(off, k))
                            off += k
                elif op[0] == "flatten":
                    img.flatten()
                elif op[0] == "format":
                    img.encryption_format(F[op[1]], pw(op[2]))
                elif op[0] == "size":
                    print(img.size())
`

// encSpec is one layer's --encryption-format and passphrase file.
type encSpec struct{ format, pass string }

func encSpecArgs(specs []encSpec) []string {
	var args []string
	for _, s := range specs {
		args = append(args, "--encryption-format", s.format, "--encryption-passphrase-file", s.pass)
	}
	return args
}

// librbdOps runs the oracle on image with specs.
func librbdOps(t *testing.T, c *radostest.Cluster, image string, specs []encSpec, ops ...[]any) string {
	t.Helper()
	pairs := [][2]string{}
	for _, s := range specs {
		pairs = append(pairs, [2]string{s.format, s.pass})
	}
	arg, err := json.Marshal(map[string]any{"conf": c.Conf, "image": image, "specs": pairs, "ops": ops})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := c.Program(ctx, "python3", "-c", layeredOracle, string(arg))
	if err != nil {
		t.Fatalf("librbd on %s: %v\n%s", image, err, out)
	}
	return string(out)
}

func librbdWriteOps(ws []encWrite) [][]any {
	var ops [][]any
	for _, w := range ws {
		ops = append(ops, []any{"write", w.off, w.n, w.val})
	}
	return ops
}

// librbdLayeredRead is the image's plaintext as librbd's load2 reads it.
func librbdLayeredRead(t *testing.T, c *radostest.Cluster, image string, specs []encSpec) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plain")
	librbdOps(t, c, image, specs, []any{"read", out})
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// purerbdLayeredRead is the image's plaintext as purerbd serves it with
// specs, copied with nbdcopy (which follows the export's block status).
func purerbdLayeredRead(t *testing.T, c *radostest.Cluster, image string, specs []encSpec) []byte {
	t.Helper()
	s := serveImage(t, c, append([]string{"--image", "rbd/" + image, "--read-only"}, encSpecArgs(specs)...)...)
	out := filepath.Join(t.TempDir(), "plain")
	runTool(t, "nbdcopy", s.uri(), out)
	s.stop(t)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// purerbdLayeredWrite writes ws through purerbd with specs (qemu-io as
// the NBD client).
func purerbdLayeredWrite(t *testing.T, c *radostest.Cluster, image string, specs []encSpec, ws []encWrite) {
	t.Helper()
	s := serveImage(t, c, append([]string{"--image", "rbd/" + image}, encSpecArgs(specs)...)...)
	runTool(t, "qemu-io", append([]string{"-f", "raw", s.uri()}, qemuIOArgs(ws)...)...)
	s.stop(t)
}

// layeredModel is what a clone's plaintext must read as: the parent's
// writes (made before the snapshot) at the same plaintext offsets, up to
// the shared part of the data areas, and the clone's writes over them.
// Bytes nobody wrote are compared only in objects no write touched, in
// the parent or the clone (see plainModel for why).
type layeredModel struct {
	data, defined []byte
	zero          []bool // objects' worth of plaintext that must read as zeroes
}

// objectOf is the 4 MiB object holding plaintext byte q of an image
// whose data area starts at dataOffset.
func objectOf(q, dataOffset int64) int64 { return (q + dataOffset) >> 22 }

func newLayeredModel(size, parentShared, parentOffset, childOffset int64, parent, child []encWrite) *layeredModel {
	m := &layeredModel{data: make([]byte, size), defined: make([]byte, size), zero: make([]bool, size)}
	touchedP, touchedC := map[int64]bool{}, map[int64]bool{}
	for _, w := range parent {
		for q := w.off; q < w.off+w.n && q < parentShared; q++ {
			m.data[q], m.defined[q] = w.val, 1
		}
		for q := w.off; q < w.off+w.n; q += 4096 {
			touchedP[objectOf(q, parentOffset)] = true
		}
		touchedP[objectOf(w.off+w.n-1, parentOffset)] = true
	}
	for _, w := range child {
		for q := w.off; q < w.off+w.n; q++ {
			m.data[q], m.defined[q] = w.val, 1
		}
		for q := w.off; q < w.off+w.n; q += 4096 {
			touchedC[objectOf(q, childOffset)] = true
		}
		touchedC[objectOf(w.off+w.n-1, childOffset)] = true
	}
	for q := int64(0); q < size; q++ {
		pObj := q < parentShared && touchedP[objectOf(q, parentOffset)]
		m.zero[q] = !touchedC[objectOf(q, childOffset)] && !pObj
	}
	return m
}

func (m *layeredModel) check(t *testing.T, what string, got []byte) {
	t.Helper()
	if len(got) != len(m.data) {
		t.Fatalf("%s: %d bytes of plaintext, want %d", what, len(got), len(m.data))
	}
	written := 0
	for i := range got {
		switch {
		case m.defined[i] == 1:
			written++
			if got[i] != m.data[i] {
				t.Fatalf("%s: plaintext byte %d (written) is %#x, want %#x", what, i, got[i], m.data[i])
			}
		case m.zero[i] && got[i] != 0:
			t.Fatalf("%s: plaintext byte %d (in objects never written) is %#x, want 0", what, i, got[i])
		}
	}
	if written == 0 {
		t.Fatalf("%s: nothing written to compare", what)
	}
}

// dataOffsetOf is where rbd encryption format puts the data area of an
// image of 4 MiB objects.
func dataOffsetOf(format string) int64 {
	if format == "luks1" {
		return 4 << 20
	}
	return 16 << 20
}

func TestLayeredEncryptionInterop(t *testing.T) {
	nbdtest.RequireTool(t, "qemu-io", "qemu-utils")
	nbdtest.RequireTool(t, "nbdcopy", "libnbd-bin")
	nbdtest.RequireTool(t, "cryptsetup", "cryptsetup-bin")
	c := radostest.New(t, radostest.Options{Release: radostest.ReleaseReef})
	dir := t.TempDir()
	passFile := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parentSpec := encSpec{"luks2", passFile("parent", "parent passphrase")}
	cloneSpecs := map[string]encSpec{
		"luks1": {"luks1", passFile("clone1", "clone one passphrase")},
		"luks2": {"luks2", passFile("clone2", "clone two passphrase")},
	}
	wrong := passFile("wrong", "not the passphrase")

	const size = 64 << 20
	pOff := dataOffsetOf("luks2")
	pArea := int64(size) - pOff
	// The parent, formatted and written by librbd before the snapshot:
	// the start, an unaligned run across an object boundary, the end of
	// its data area.
	parentWrites := []encWrite{
		{0, 4096, 0x11},
		{5<<20 + 100, 300000, 0x22},
		{30 << 20, 1 << 20, 0x33},
		{pArea - 8192, 8192, 0x3c},
	}
	rbdTool(t, c, "create", "--size", "64M", "rbd/parent")
	rbdTool(t, c, "encryption", "format", "rbd/parent", "luks2", parentSpec.pass)
	librbdOps(t, c, "parent", []encSpec{parentSpec}, librbdWriteOps(parentWrites)...)
	rbdTool(t, c, "snap", "create", "rbd/parent@s")
	rbdTool(t, c, "snap", "protect", "rbd/parent@s")

	// Writes into clones: unaligned, into objects the clone does not have
	// yet (copy-ups of the parent's data re-encrypted under the clone's
	// key), zeroes over part of the parent's data, and past the shared
	// part of the data areas.
	librbdCloneWrites := []encWrite{
		{12288, 8192, 0x44},
		{10<<20 + 7, 5000, 0x55},
	}
	purerbdCloneWrites := []encWrite{
		{30<<20 + 4096, 100, 0x66},
		{5<<20 + 200, 1000, 0},
		{20<<20 + 1000, 3000, 0x77},
		{pArea - 4096 - 10, 20, 0x78},
	}

	for _, format := range []string{"luks1", "luks2"} {
		cs := cloneSpecs[format]
		specs := []encSpec{cs, parentSpec}
		cOff := dataOffsetOf(format)
		cSize := int64(size) - cOff
		// the parent's data the clone still shares: the overlap (the
		// parent's size) from the clone's data offset, no more than the
		// parent's data area
		shared := min(int64(size)-cOff, pArea)

		t.Run(format+"-clone-formatted-by-rbd", func(t *testing.T) {
			image := "child-rbd-" + format
			rbdTool(t, c, "clone", "rbd/parent@s", "rbd/"+image)
			rbdTool(t, c, "encryption", "format", "rbd/"+image, format, cs.pass)
			librbdOps(t, c, image, specs, librbdWriteOps(librbdCloneWrites)...)
			m := newLayeredModel(cSize, shared, pOff, cOff, parentWrites, librbdCloneWrites)
			m.check(t, "librbd reading its clone", librbdLayeredRead(t, c, image, specs))
			m.check(t, "purerbd reading librbd's clone", purerbdLayeredRead(t, c, image, specs))

			// purerbd writes (copy-ups), librbd reads
			purerbdLayeredWrite(t, c, image, specs, purerbdCloneWrites)
			m = newLayeredModel(cSize, shared, pOff, cOff, parentWrites, append(append([]encWrite{}, librbdCloneWrites...), purerbdCloneWrites...))
			m.check(t, "librbd reading purerbd's copy-ups", librbdLayeredRead(t, c, image, specs))
			m.check(t, "purerbd reading the same", purerbdLayeredRead(t, c, image, specs))

			checkCloneMagic(t, c, image)
			// purerbd flattens; librbd reads with the clone's spec alone
			purerbd(t, append(append([]string{"-c", c.Conf, "rbd", "flatten", "--no-progress"}, encSpecArgs(specs)...), "rbd/"+image)...)
			if info := rbdTool(t, c, "info", "rbd/"+image); strings.Contains(info, "parent:") {
				t.Fatalf("still a clone after purerbd's flatten:\n%s", info)
			}
			checkLUKSMagic(t, c, image)
			m.check(t, "librbd reading purerbd's flattened clone", librbdLayeredRead(t, c, image, []encSpec{cs}))
			m.check(t, "purerbd reading it", purerbdLayeredRead(t, c, image, []encSpec{cs}))
		})

		t.Run(format+"-clone-formatted-by-purerbd", func(t *testing.T) {
			image := "child-purerbd-" + format
			rbdTool(t, c, "clone", "rbd/parent@s", "rbd/"+image)
			purerbd(t, "-c", c.Conf, "rbd", "encryption", "format", "rbd/"+image, format, cs.pass)
			// librbd opens purerbd's format with load2 and writes
			librbdOps(t, c, image, specs, librbdWriteOps(librbdCloneWrites)...)
			purerbdLayeredWrite(t, c, image, specs, purerbdCloneWrites)
			all := append(append([]encWrite{}, librbdCloneWrites...), purerbdCloneWrites...)
			m := newLayeredModel(cSize, shared, pOff, cOff, parentWrites, all)
			m.check(t, "librbd reading purerbd's clone", librbdLayeredRead(t, c, image, specs))
			m.check(t, "purerbd reading it", purerbdLayeredRead(t, c, image, specs))

			checkCloneMagic(t, c, image)
			// librbd flattens (Reef's rbd flatten with the specs);
			// purerbd reads with the clone's spec alone
			rbdTool(t, c, append(append([]string{"flatten", "--no-progress"}, encSpecArgs(specs)...), "rbd/"+image)...)
			checkLUKSMagic(t, c, image)
			m.check(t, "purerbd reading librbd's flattened clone", purerbdLayeredRead(t, c, image, []encSpec{cs}))
			m.check(t, "librbd reading it", librbdLayeredRead(t, c, image, []encSpec{cs}))
		})
	}

	// A LUKS1 parent under LUKS2 clones: the clone's data area starts
	// later than the parent's, so the parent's data past the clone's
	// share of the overlap (the last 12 MiB of it) is not the clone's.
	t.Run("luks2-clones-of-a-luks1-parent", func(t *testing.T) {
		p1Spec := encSpec{"luks1", passFile("parent1", "luks1 parent passphrase")}
		p1Off := dataOffsetOf("luks1")
		p1Area := int64(size) - p1Off
		p1Writes := []encWrite{{100, 5000, 0x81}, {20 << 20, 1 << 20, 0x82}, {p1Area - 8192, 8192, 0x83}}
		rbdTool(t, c, "create", "--size", "64M", "rbd/parent1")
		rbdTool(t, c, "encryption", "format", "rbd/parent1", "luks1", p1Spec.pass)
		librbdOps(t, c, "parent1", []encSpec{p1Spec}, librbdWriteOps(p1Writes)...)
		rbdTool(t, c, "snap", "create", "rbd/parent1@s")
		rbdTool(t, c, "snap", "protect", "rbd/parent1@s")
		cs := cloneSpecs["luks2"]
		specs := []encSpec{cs, p1Spec}
		cOff := dataOffsetOf("luks2")
		cSize := int64(size) - cOff
		shared := min(cSize, p1Area)
		for _, formatter := range []string{"rbd", "purerbd"} {
			image := "child-of-luks1-" + formatter
			rbdTool(t, c, "clone", "rbd/parent1@s", "rbd/"+image)
			if formatter == "rbd" {
				rbdTool(t, c, "encryption", "format", "rbd/"+image, "luks2", cs.pass)
			} else {
				purerbd(t, "-c", c.Conf, "rbd", "encryption", "format", "rbd/"+image, "luks2", cs.pass)
			}
			librbdOps(t, c, image, specs, librbdWriteOps(librbdCloneWrites)...)
			ws := []encWrite{{20<<20 + 4096, 100, 0x84}, {100 + 1000, 500, 0}}
			purerbdLayeredWrite(t, c, image, specs, ws)
			all := append(append([]encWrite{}, librbdCloneWrites...), ws...)
			m := newLayeredModel(cSize, shared, p1Off, cOff, p1Writes, all)
			m.check(t, "librbd reading "+formatter+"'s clone of a LUKS1 parent", librbdLayeredRead(t, c, image, specs))
			m.check(t, "purerbd reading it", purerbdLayeredRead(t, c, image, specs))
		}
	})

	t.Run("clone-inherits-parent-encryption", func(t *testing.T) {
		image := "child-inherits"
		rbdTool(t, c, "clone", "rbd/parent@s", "rbd/"+image)
		specs := []encSpec{parentSpec}
		librbdOps(t, c, image, specs, librbdWriteOps(librbdCloneWrites)...)
		purerbdLayeredWrite(t, c, image, specs, purerbdCloneWrites)
		all := append(append([]encWrite{}, librbdCloneWrites...), purerbdCloneWrites...)
		m := newLayeredModel(pArea, pArea, pOff, pOff, parentWrites, all)
		m.check(t, "librbd reading the inheriting clone", librbdLayeredRead(t, c, image, specs))
		m.check(t, "purerbd reading it", purerbdLayeredRead(t, c, image, specs))
		// both specs given (the parent's twice) open it too
		m.check(t, "purerbd reading it with a spec a layer", purerbdLayeredRead(t, c, image, []encSpec{parentSpec, parentSpec}))
	})

	t.Run("refusals", func(t *testing.T) {
		image := "child-refusals"
		rbdTool(t, c, "clone", "rbd/parent@s", "rbd/"+image)
		rbdTool(t, c, "encryption", "format", "rbd/"+image, "luks2", cloneSpecs["luks2"].pass)
		before := rbdExportBytes(t, c, "rbd/"+image)
		for _, r := range []struct {
			name  string
			specs []encSpec
			want  error
			layer int
		}{
			{"wrong clone passphrase", []encSpec{{"luks2", wrong}, parentSpec}, luks.ErrWrongPassphrase, 0},
			{"wrong parent passphrase", []encSpec{cloneSpecs["luks2"], {"luks2", wrong}}, luks.ErrWrongPassphrase, 1},
			{"clone spec alone (tried on the parent)", []encSpec{cloneSpecs["luks2"]}, luks.ErrWrongPassphrase, 1},
			{"wrong format", []encSpec{{"luks1", cloneSpecs["luks2"].pass}, parentSpec}, luks.ErrNotLUKS, 0},
			{"too many specs", []encSpec{cloneSpecs["luks2"], parentSpec, parentSpec}, luks.ErrSpecCount, -1},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			var stderr syncbuf.Buffer
			err := runNBDServe(ctx, append([]string{"-c", c.Conf, "--socket", filepath.Join(t.TempDir(), "s"), "--image", "rbd/" + image},
				encSpecArgs(r.specs)...), &syncbuf.Buffer{}, &stderr)
			cancel()
			if !errors.Is(err, r.want) {
				t.Fatalf("%s: %v, want %v", r.name, err, r.want)
			}
			var le *luks.LayerError
			if r.layer >= 0 && (!errors.As(err, &le) || le.Layer != r.layer) {
				t.Fatalf("%s: %v, want the failure of layer %d", r.name, err, r.layer)
			}
			if strings.Contains(err.Error(), "passphrase\"") || strings.Contains(stderr.String(), "clone two") {
				t.Fatalf("%s: a passphrase appears in the error", r.name)
			}
		}
		// an unencrypted parent under an encrypted spec
		rbdTool(t, c, "create", "--size", "64M", "rbd/plainparent")
		rbdTool(t, c, "snap", "create", "rbd/plainparent@s")
		rbdTool(t, c, "snap", "protect", "rbd/plainparent@s")
		rbdTool(t, c, "clone", "rbd/plainparent@s", "rbd/plainchild")
		rbdTool(t, c, "encryption", "format", "rbd/plainchild", "luks1", cloneSpecs["luks1"].pass)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		err := runNBDServe(ctx, append([]string{"-c", c.Conf, "--socket", filepath.Join(t.TempDir(), "s"), "--image", "rbd/plainchild"},
			encSpecArgs([]encSpec{cloneSpecs["luks1"], parentSpec})...), &syncbuf.Buffer{}, &syncbuf.Buffer{})
		var le *luks.LayerError
		if !errors.Is(err, luks.ErrNotLUKS) || !errors.As(err, &le) || le.Layer != 1 {
			t.Fatalf("an unencrypted parent under a spec: %v", err)
		}
		// with the clone's spec alone, the plaintext parent is read as
		// plaintext, as librbd assumes it
		ws := []encWrite{{4096, 4096, 0x99}}
		purerbdLayeredWrite(t, c, "plainchild", []encSpec{cloneSpecs["luks1"]}, ws)
		m := newLayeredModel(size-(4<<20), size-(4<<20), 0, 4<<20, nil, ws)
		m.check(t, "librbd reading a clone of a plaintext parent", librbdLayeredRead(t, c, "plainchild", []encSpec{cloneSpecs["luks1"]}))
		if after := rbdExportBytes(t, c, "rbd/"+image); !bytes.Equal(before, after) {
			t.Fatal("a refused open changed the image")
		}
	})
}

// checkLUKSMagic checks that a flattened clone's header is plain LUKS
// again for Ceph's own tools and for cryptsetup: the header rbd export
// reads, dumped by cryptsetup luksDump.
func checkLUKSMagic(t *testing.T, c *radostest.Cluster, image string) {
	t.Helper()
	b := rbdExportBytes(t, c, "rbd/"+image)
	if !bytes.HasPrefix(b, []byte("LUKS\xba\xbe")) {
		t.Fatalf("%s: header magic %q after flatten", image, b[:6])
	}
	h, err := luks.Parse(b[:1<<20])
	if err != nil || h.Clone {
		t.Fatalf("%s: header after flatten: %+v %v", image, h, err)
	}
	if cryptsetupDump(t, b[:h.DataOffset]) != nil {
		t.Fatalf("%s: cryptsetup does not read the header after flatten", image)
	}
}

// checkCloneMagic checks that an encrypted clone's header is not LUKS
// for other tools: cryptsetup refuses it.
func checkCloneMagic(t *testing.T, c *radostest.Cluster, image string) {
	t.Helper()
	b := rbdExportBytes(t, c, "rbd/"+image)
	if !bytes.HasPrefix(b, []byte("RBDL\xba\xbe")) {
		t.Fatalf("%s: header magic %q, want the clone magic", image, b[:6])
	}
	if cryptsetupDump(t, b[:16<<20]) == nil {
		t.Fatalf("%s: cryptsetup takes the clone's header for LUKS", image)
	}
}

// cryptsetupDump runs cryptsetup luksDump on a file holding header.
func cryptsetupDump(t *testing.T, header []byte) error {
	t.Helper()
	p := filepath.Join(t.TempDir(), "header")
	if err := os.WriteFile(p, header, 0o600); err != nil {
		t.Fatal(err)
	}
	return exec.Command("cryptsetup", "luksDump", p).Run()
}
