package main

import (
	"bytes"
	"context"
	"errors"
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

// Layered encryption (Ceph 17 and later) against librbd on a Reef
// cluster, both ways: a parent formatted and written by librbd, clones
// formatted with keys of their own by Reef's rbd and by purerbd, read
// and written through `purerbd nbd serve` with one spec a layer and
// through librbd's rbd_encryption_load2 (the root's python3 rbd
// binding); flatten by each side, read afterwards by the other with the
// clone's spec alone; a clone that inherits its parent's encryption; and
// refusals.

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
