package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
	"github.com/purerbd/purerbd/rbd/luks"
)

// Helpers of TestLayeredEncryptionInterop: librbd's side through the
// release's python3 rbd binding, purerbd's through nbd serve, the model
// of a clone's plaintext, and header checks.

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
	checkPlaintext(t, what, got, m.data, m.defined, func(i int) bool { return m.zero[i] })
}

// dataOffsetOf is where rbd encryption format puts the data area of an
// image of 4 MiB objects.
func dataOffsetOf(format string) int64 {
	if format == "luks1" {
		return 4 << 20
	}
	return 16 << 20
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
