package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/syncbuf"
	"github.com/purerbd/purerbd/nbd/nbdtest"
	"github.com/purerbd/purerbd/rados/radostest"
	"github.com/purerbd/purerbd/rbd/luks"
)

// Interoperability of LUKS-encrypted images with librbd, both ways:
// images formatted by `rbd encryption format` and by `purerbd rbd
// encryption format`, written and read by purerbd (nbd serve
// --encryption-format) and by librbd's crypto layer (qemu's rbd driver
// with encrypt.format), each side checking the other's plaintext.
// Both formatters run with their default KDF costs, as users get them.

// encWrite is one plaintext write: fill [off, off+n) with val (val 0:
// write zeroes).
type encWrite struct {
	off, n int64
	val    byte
}

// plainModel is what an encrypted image must read as: the bytes written,
// and zeroes in every object no write touched. The rest of an object
// that exists is not compared: librbd decrypts the zeroes a plain read
// returns for never-written bytes of an existing object into noise
// (memstore; bluestore's sparse reads give zeroes instead), purerbd
// returns zeroes; neither is data anyone wrote.
type plainModel struct {
	data, defined []byte
	dataOffset    int64
	touched       map[int64]bool // raw object numbers written to
}

func newPlainModel(size, dataOffset int64) *plainModel {
	return &plainModel{data: make([]byte, size), defined: make([]byte, size), dataOffset: dataOffset, touched: map[int64]bool{}}
}

func (m *plainModel) apply(ws []encWrite) {
	for _, w := range ws {
		for i := w.off; i < w.off+w.n; i++ {
			m.data[i], m.defined[i] = w.val, 1
		}
		for o := (m.dataOffset + w.off) >> 22; o <= (m.dataOffset+w.off+w.n-1)>>22; o++ {
			m.touched[o] = true
		}
	}
}

// check compares got with the model where it is defined.
func (m *plainModel) check(t *testing.T, what string, got []byte) {
	t.Helper()
	checkPlaintext(t, what, got, m.data, m.defined, func(i int) bool { return !m.touched[(m.dataOffset+int64(i))>>22] })
}

// checkPlaintext compares got with data where defined is 1, and with
// zeroes where zero says no write reached (objects never written).
func checkPlaintext(t *testing.T, what string, got, data, defined []byte, zero func(i int) bool) {
	t.Helper()
	if len(got) != len(data) {
		t.Fatalf("%s: %d bytes of plaintext, want %d", what, len(got), len(data))
	}
	written := 0
	for i := range got {
		switch {
		case defined[i] == 1:
			written++
			if got[i] != data[i] {
				t.Fatalf("%s: plaintext byte %d (written) is %#x, want %#x", what, i, got[i], data[i])
			}
		case zero(i) && got[i] != 0:
			t.Fatalf("%s: plaintext byte %d (in an object never written) is %#x, want 0", what, i, got[i])
		}
	}
	if written == 0 {
		t.Fatalf("%s: nothing written to compare", what)
	}
}

// qemuIOArgs are qemu-io's -c commands for ws.
func qemuIOArgs(ws []encWrite) []string {
	var args []string
	for _, w := range ws {
		if w.val == 0 {
			args = append(args, "-c", fmt.Sprintf("write -z %d %d", w.off, w.n))
		} else {
			args = append(args, "-c", fmt.Sprintf("write -P 0x%02x %d %d", w.val, w.off, w.n))
		}
	}
	return args
}

// librbdOpts are qemu's --image-opts for spec through librbd with its
// LUKS layer, the passphrase in secret sec0.
func librbdOpts(c *radostest.Cluster, image, format string) string {
	qf := map[string]string{"luks1": "luks", "luks2": "luks2"}[format]
	return fmt.Sprintf("driver=rbd,pool=rbd,image=%s,conf=%s,encrypt.format=%s,encrypt.key-secret=sec0", image, c.Conf, qf)
}

func qemuTool(t *testing.T, c *radostest.Cluster, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := c.Program(ctx, name, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	if s := string(out); strings.Contains(s, "failed") || strings.Contains(s, "error") {
		t.Fatalf("%s %s:\n%s", name, strings.Join(args, " "), s)
	}
	return string(out)
}

// librbdWrite writes ws through librbd's crypto layer (qemu-io).
func librbdWrite(t *testing.T, c *radostest.Cluster, pass, image, format string, ws []encWrite) {
	t.Helper()
	args := append([]string{"--object", "secret,id=sec0,file=" + pass, "--image-opts", librbdOpts(c, image, format)}, qemuIOArgs(ws)...)
	qemuTool(t, c, "qemu-io", args...)
}

// librbdRead is the image's plaintext as librbd decrypts it, read
// through qemu's rbd driver with qemu-img dd. Not qemu-img convert: it
// skips what the driver's block status calls holes, and Pacific's
// rbd_diff_iterate2 reports an encrypted image's allocation at raw
// offsets, not shifted by the data offset, so convert misses data.
func librbdRead(t *testing.T, c *radostest.Cluster, pass, image, format string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plain")
	qemuTool(t, c, "qemu-img", "dd", "--object", "secret,id=sec0,file="+pass, "--image-opts", "-O", "raw",
		"bs=1M", "if="+librbdOpts(c, image, format), "of="+out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// purerbdWrite writes ws through `purerbd nbd serve --encryption-format`
// (qemu-io as the NBD client), and stops the server.
func purerbdWrite(t *testing.T, c *radostest.Cluster, pass, image, format string, ws []encWrite) {
	t.Helper()
	s := serveImage(t, c, "--image", "rbd/"+image, "--encryption-format", format, "--encryption-passphrase-file", pass)
	runTool(t, "qemu-io", append([]string{"-f", "raw", s.uri()}, qemuIOArgs(ws)...)...)
	s.stop(t)
}

// purerbdRead is the image's plaintext as purerbd serves it.
func purerbdRead(t *testing.T, c *radostest.Cluster, pass, image, format string) []byte {
	t.Helper()
	s := serveImage(t, c, "--image", "rbd/"+image, "--read-only", "--encryption-format", format, "--encryption-passphrase-file", pass)
	out := filepath.Join(t.TempDir(), "plain")
	runTool(t, "qemu-img", "convert", "-f", "raw", "-O", "raw", s.uri(), out)
	s.stop(t)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncryptionInterop(t *testing.T) {
	nbdtest.RequireTool(t, "qemu-io", "qemu-utils")
	nbdtest.RequireTool(t, "qemu-img", "qemu-utils")
	c := radostest.New(t, radostest.Options{})
	pass := filepath.Join(t.TempDir(), "passphrase")
	if err := os.WriteFile(pass, []byte("correct horse battery"), 0o600); err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	// Writes by purerbd: sector-aligned and not, inside one sector and
	// across sectors, across the 4 MiB object boundary (the data offset
	// is a whole number of objects, so plaintext boundaries are object
	// boundaries), write zeroes over a whole object and its neighbours'
	// edges (the object is removed) and then into it, and write zeroes
	// over part of a written range.
	purerbdWrites := []encWrite{
		{0, 4096, 0xa1},
		{1000, 3000, 0xb2},
		{4<<20 - 512, 1024, 0xc3},
		{7 << 20, 6 << 20, 0x66},
		{8<<20 - 1000, 4<<20 + 3000, 0},
		{10485000, 9000, 0xd4},
		{19999000, 200000, 0xe5},
		{20000000, 100000, 0},
	}
	// Writes by librbd, some over purerbd's.
	librbdWrites := []encWrite{
		{8192, 4096, 0x17},
		{512, 1024, 0x28},
		{33554000, 5000, 0x39},
	}
	for _, format := range []string{"luks1", "luks2"} {
		// purerbd-aes128: AES-128-XTS, a 32-byte volume key
		for _, formatter := range []string{"rbd", "purerbd", "purerbd-aes128"} {
			t.Run(format+"-formatted-by-"+formatter, func(t *testing.T) {
				image := format + "-" + formatter
				rbdTool(t, c, "create", "--size", "64M", "rbd/"+image)
				switch formatter {
				case "rbd":
					rbdTool(t, c, "encryption", "format", "rbd/"+image, format, pass)
				case "purerbd":
					purerbd(t, "-c", c.Conf, "rbd", "encryption", "format", "rbd/"+image, format, pass)
				default:
					purerbd(t, "-c", c.Conf, "rbd", "encryption", "format", "--cipher-alg", "aes-128", "rbd/"+image, format, pass)
				}
				dataOffset := int64(4 << 20)
				if format == "luks2" {
					dataOffset = 16 << 20
				}
				model := newPlainModel(size-dataOffset, dataOffset)

				// purerbd writes, librbd reads
				purerbdWrite(t, c, pass, image, format, purerbdWrites)
				model.apply(purerbdWrites)
				model.check(t, "librbd reading what purerbd wrote", librbdRead(t, c, pass, image, format))

				// librbd writes, purerbd reads
				librbdWrite(t, c, pass, image, format, librbdWrites)
				model.apply(librbdWrites)
				model.check(t, "purerbd reading what librbd wrote", purerbdRead(t, c, pass, image, format))
				model.check(t, "librbd reading the same", librbdRead(t, c, pass, image, format))
			})
		}
	}

	t.Run("wrong-passphrase", func(t *testing.T) {
		image := "luks2-wrong"
		rbdTool(t, c, "create", "--size", "64M", "rbd/"+image)
		purerbd(t, "-c", c.Conf, "rbd", "encryption", "format", "rbd/"+image, "luks2", pass)
		before := rbdExportBytes(t, c, "rbd/"+image)
		wrong := filepath.Join(t.TempDir(), "wrong")
		if err := os.WriteFile(wrong, []byte("correct horse battery "), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var stderr syncbuf.Buffer
		err := runNBDServe(ctx, []string{"-c", c.Conf, "--socket", filepath.Join(t.TempDir(), "s"), "--image", "rbd/" + image,
			"--encryption-format", "luks", "--encryption-passphrase-file", wrong}, &syncbuf.Buffer{}, &stderr)
		if !errors.Is(err, luks.ErrWrongPassphrase) {
			t.Fatalf("serving with a wrong passphrase: %v, want ErrWrongPassphrase", err)
		}
		if strings.Contains(err.Error(), "correct horse") || strings.Contains(stderr.String(), "correct horse") {
			t.Fatal("the passphrase appears in an error")
		}
		if after := rbdExportBytes(t, c, "rbd/"+image); !bytes.Equal(before, after) {
			t.Fatal("a failed open changed the image")
		}
	})
}

// TestEncryptionMapFlags: nbd map, rbd-nbd map and device map take the encryption
// options repeated, in order, counted as rbd-nbd counts them (passphrase
// files alone are luks), for an image only, and hand them to the export.
func TestEncryptionMapFlags(t *testing.T) {
	m, err := parseMapArgs([]string{"--encryption-format", "luks2", "--encryption-passphrase-file", "/p",
		"--encryption-format", "luks1", "--encryption-passphrase-file", "/q", "rbd/img"}, nil)
	if err != nil || fmt.Sprint(m.encryption) != "{[luks2 luks1] [/p /q]}" {
		t.Fatalf("nbd map: %+v, %v", m.encryption, err)
	}
	if m, err := parseMapArgs([]string{"--encryption-passphrase-file", "/p", "--encryption-passphrase-file", "/q", "rbd/img"}, nil); err != nil ||
		fmt.Sprint(m.encryption) != "{[] [/p /q]}" {
		t.Fatalf("nbd map with passphrase files alone: %+v, %v", m.encryption, err)
	}
	for _, args := range [][]string{
		{"--encryption-format", "luks2", "rbd/img"},
		{"--encryption-format", "luks2", "--encryption-format", "luks2", "--encryption-passphrase-file", "/p", "rbd/img"},
		{"--encryption-format", "luks2", "--encryption-passphrase-file", "/p", "--memory", "1G"},
		{"--encryption-format", "luks3", "--encryption-passphrase-file", "/p", "rbd/img"},
	} {
		if _, err := parseMapArgs(args, nil); err == nil {
			t.Errorf("nbd map %v: no error", args)
		}
	}
	o := newRBDNBDOptions()
	o.encFormats, o.encPassphrase = []string{"luks"}, []string{"/p"}
	if m, err := o.mapFlags("img", false); err != nil || fmt.Sprint(m.encryption) != "{[luks] [/p]}" {
		t.Fatalf("rbd-nbd map: %+v, %v", m.encryption, err)
	}
	o.encFormats, o.encPassphrase = []string{"luks2", "luks1"}, []string{"/p", "/q"}
	if m, err := o.mapFlags("img", false); err != nil || fmt.Sprint(m.encryption) != "{[luks2 luks1] [/p /q]}" {
		t.Errorf("rbd-nbd map with a parent's encryption: %+v, %v", m.encryption, err)
	}
	// rbd device map -t nbd -o hands each pair on, in order
	d := (&rbdCommand{}).newDeviceOptions()
	if err := d.setOptions("encryption-format=luks2,encryption-passphrase-file=/p,encryption-format=luks1,encryption-passphrase-file=/q"); err != nil {
		t.Fatal(err)
	}
	if m, err := d.nbd.mapFlags("img", false); err != nil || fmt.Sprint(m.encryption) != "{[luks2 luks1] [/p /q]}" {
		t.Errorf("device map -o: %+v, %v", m.encryption, err)
	}
}
