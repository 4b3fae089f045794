package nbd_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// sparseRandomFile writes size bytes of random data with zero runs in
// it, so that copies exercise both data and holes.
func sparseRandomFile(t *testing.T, path string, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	for off := 0; off+(256<<10) <= size; off += 1 << 20 {
		clear(data[off : off+256<<10]) // a zero run in every MiB
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestNbdcopyRoundTrip(t *testing.T) {
	nbdcopy := nbdtest.RequireTool(t, "nbdcopy", "libnbd-bin")
	const size = 24 << 20
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.bin"), filepath.Join(dir, "out.bin")
	data := sparseRandomFile(t, in, size)

	for _, kind := range []string{"memory", "file"} {
		t.Run(kind, func(t *testing.T) {
			var backend nbd.Backend
			var backing string
			if kind == "memory" {
				m, _ := nbd.NewMemory(size)
				backend = m
			} else {
				backing = filepath.Join(t.TempDir(), "disk.img")
				if err := os.WriteFile(backing, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(backing, size); err != nil {
					t.Fatal(err)
				}
				f, err := nbd.OpenFile(backing, false)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				backend = f
			}
			srv := nbdtest.Start(t, nbd.Config{Exports: []*nbd.Export{{Name: "disk", Backend: backend}}})
			uri := srv.URI("disk")
			run(t, nbdcopy, "--flush", in, uri)
			os.Remove(out)
			run(t, nbdcopy, uri, out)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if sha256.Sum256(got) != sha256.Sum256(data) {
				t.Fatalf("nbdcopy out differs from what nbdcopy put in")
			}
			if backing != "" {
				disk, err := os.ReadFile(backing)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(disk, data) {
					t.Fatalf("backing file differs from the data copied in")
				}
			}
			// A second pass with many connections and small requests.
			run(t, nbdcopy, "--connections=4", "--requests=32", "--request-size=65536", uri, out)
			got, _ = os.ReadFile(out)
			if !bytes.Equal(got, data) {
				t.Fatalf("multi-connection copy differs")
			}
		})
	}
}

func TestQemuIOPatterns(t *testing.T) {
	qemuIO := nbdtest.RequireTool(t, "qemu-io", "qemu-utils")
	srv, _ := nbdtest.StartMemory(t, "disk", 16<<20)
	uri := srv.URI("disk")
	cmds := []string{
		"write -P 0xab 0 1M",
		"read -P 0xab 0 1M",
		"write -P 0x11 4095 3", // unaligned
		"read -P 0x11 4095 3",
		"read -P 0xab 0 4095",
		"discard 512k 512k",
		"read -P 0xab 4098 520190", // up to the trimmed range
		"write -z 2M 1M",           // NO_HOLE zeroes
		"read -P 0 2M 1M",
		"write -z -u 3M 1M", // may punch holes
		"read -P 0 3M 1M",
		"write -f -P 0x22 4M 64k", // FUA
		"read -P 0x22 4M 64k",
		"flush",
		"aio_write -P 0x33 5M 64k",
		"aio_write -P 0x44 6M 64k",
		"aio_flush",
		"read -P 0x33 5M 64k",
		"read -P 0x44 6M 64k",
		"read -P 0 15M 1M",           // never written
		"write -P 0x55 16760832 16k", // ends at the last byte
		"read -P 0x55 16760832 16k",
	}
	args := []string{"-f", "raw", uri}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out := run(t, qemuIO, args...)
	if strings.Contains(out, "Pattern verification failed") || strings.Contains(out, "failed") {
		t.Fatalf("qemu-io:\n%s", out)
	}
}

func TestQemuImgConvertCompare(t *testing.T) {
	qemuImg := nbdtest.RequireTool(t, "qemu-img", "qemu-utils")
	const size = 8 << 20
	in := filepath.Join(t.TempDir(), "in.bin")
	sparseRandomFile(t, in, size)
	srv, _ := nbdtest.StartMemory(t, "disk", size)
	uri := srv.URI("disk")
	run(t, qemuImg, "convert", "-n", "-f", "raw", "-O", "raw", in, uri)
	out := run(t, qemuImg, "compare", "-f", "raw", "-F", "raw", in, uri)
	if !strings.Contains(out, "Images are identical") {
		t.Fatalf("qemu-img compare:\n%s", out)
	}
	m := run(t, qemuImg, "map", "--output=json", "-f", "raw", uri)
	if !strings.Contains(m, `"zero": true`) || !strings.Contains(m, `"data": true`) {
		t.Errorf("qemu-img map sees no holes or no data:\n%s", m)
	}
}

func TestFioVerify(t *testing.T) {
	fio := nbdtest.RequireTool(t, "fio", "fio")
	srv, _ := nbdtest.StartMemory(t, "", 64<<20)
	uri := srv.URI("")
	for _, args := range [][]string{
		{"--rw=randwrite", "--bs=4k", "--iodepth=32", "--size=16M", "--verify=crc32c", "--verify_fatal=1", "--verify_state_save=0"},
		{"--rw=write", "--bs=1M", "--iodepth=4", "--size=32M", "--verify=crc32c", "--verify_fatal=1", "--verify_state_save=0"},
		{"--rw=randread", "--bs=4k", "--iodepth=32", "--size=64M", "--time_based", "--runtime=1"},
	} {
		base := []string{"--name=nbd", "--ioengine=nbd", "--uri=" + uri, "--output-format=terse", "--terse-version=3"}
		out := run(t, fio, append(base, args...)...)
		// Terse v3: field 5 is the error code.
		fields := strings.Split(strings.TrimSpace(out), ";")
		if len(fields) < 5 || fields[4] != "0" {
			t.Fatalf("fio %v:\n%s", args, out)
		}
	}
}
