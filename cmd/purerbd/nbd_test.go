package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/syncbuf"
	"github.com/purerbd/purerbd/nbd/nbdtest"
	"github.com/purerbd/purerbd/rados/radostest"
)

// Interoperability of `purerbd nbd serve --image`: RBD images written and
// read through NBD by libnbd (nbdcopy, nbdinfo), qemu (qemu-io) and fio,
// with librbd (the rbd CLI) as the oracle of what is in the image.

// span is a half-open byte range.
type span struct{ Off, End int64 }

func normaliseSpans(s []span) []span {
	sort.Slice(s, func(i, j int) bool { return s[i].Off < s[j].Off })
	var out []span
	for _, x := range s {
		if x.End <= x.Off {
			continue
		}
		if n := len(out); n > 0 && out[n-1].End >= x.Off {
			out[n-1].End = max(out[n-1].End, x.End)
			continue
		}
		out = append(out, x)
	}
	return out
}

// runTool runs an external program and fails the test on error.
func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// serving is a `purerbd nbd serve` running in this process.
type serving struct {
	socket string
	cancel context.CancelFunc
	done   chan struct{} // closed when the server returned err
	err    error
	stderr *syncbuf.Buffer
}

func (s *serving) uri() string { return "nbd+unix:///?socket=" + s.socket }

// stop interrupts the server and waits for it (and its image) to close.
func (s *serving) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case <-s.done:
		if s.err != nil {
			t.Fatalf("nbd serve: %v\n%s", s.err, s.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("nbd serve did not stop")
	}
}

// serveImage starts `purerbd nbd serve -c CONF --image ... --socket S`.
func serveImage(t *testing.T, c *radostest.Cluster, args ...string) *serving {
	t.Helper()
	return startServe(t, append([]string{"-c", c.Conf}, args...)...)
}

// startServe starts `purerbd nbd serve --socket S ARGS` in this process
// and waits for its socket.
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{socket: filepath.Join(t.TempDir(), "nbd.sock"), cancel: cancel, done: make(chan struct{}), stderr: &syncbuf.Buffer{}}
	args = append([]string{"--socket", s.socket}, args...)
	go func() {
		s.err = runNBDServe(ctx, args, &syncbuf.Buffer{}, s.stderr)
		close(s.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if conn, err := net.Dial("unix", s.socket); err == nil {
			conn.Close()
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("nbd serve %v ended: %v\n%s", args, s.err, s.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("nbd serve %v: no socket after a minute\n%s", args, s.stderr.String())
		}
	}
}

// nbdMap is nbdinfo --map of uri: the allocated (data) spans.
func nbdMap(t *testing.T, uri string) []span {
	t.Helper()
	var s []span
	for _, line := range strings.Split(runTool(t, "nbdinfo", "--map", uri), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		off, err1 := strconv.ParseInt(f[0], 10, 64)
		n, err2 := strconv.ParseInt(f[1], 10, 64)
		typ, err3 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("nbdinfo --map line %q", line)
		}
		if typ&1 == 0 { // not a hole
			s = append(s, span{off, off + n})
		}
	}
	return normaliseSpans(s)
}

// librbdDiff is `rbd diff` of spec as spans.
func librbdDiff(t *testing.T, c *radostest.Cluster, spec string, args ...string) []span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Rbd(ctx, append(append([]string{"diff", "--format", "json"}, args...), spec)...)
	if err != nil {
		t.Fatal(err)
	}
	var d []struct {
		Offset int64  `json:"offset"`
		Length int64  `json:"length"`
		Exists string `json:"exists"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("rbd diff: %v: %s", err, out)
	}
	var s []span
	for _, e := range d {
		if e.Exists == "true" {
			s = append(s, span{e.Offset, e.Offset + e.Length})
		}
	}
	return normaliseSpans(s)
}

func rbdTool(t *testing.T, c *radostest.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.Rbd(ctx, args...)
	if err != nil {
		t.Fatalf("rbd %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// rbdExportBytes is the image's content as librbd reads it.
func rbdExportBytes(t *testing.T, c *radostest.Cluster, spec string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "export")
	rbdTool(t, c, "export", "--no-progress", spec, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkObjectMap runs `rbd object-map check` and checks the map is not
// flagged invalid afterwards.
func checkObjectMap(t *testing.T, c *radostest.Cluster, spec string) {
	t.Helper()
	rbdTool(t, c, "object-map", "check", "--no-progress", spec)
	var info struct {
		Flags []string `json:"flags"`
	}
	if err := json.Unmarshal([]byte(rbdTool(t, c, "info", "--format", "json", spec)), &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Flags) != 0 {
		t.Fatalf("%s: flags %v after object-map check", spec, info.Flags)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestNBDServeImage serves RBD images over NBD and checks every client's
// view against librbd's.
func TestNBDServeImage(t *testing.T) {
	for _, tool := range []struct{ name, pkg string }{
		{"nbdinfo", "libnbd-bin"}, {"nbdcopy", "libnbd-bin"}, {"qemu-io", "qemu-utils"}, {"fio", "fio"},
	} {
		nbdtest.RequireTool(t, tool.name, tool.pkg)
	}
	c := radostest.New(t, radostest.Options{})
	t.Run("write", func(t *testing.T) { testNBDWriteImage(t, c) })
	t.Run("import", func(t *testing.T) { testNBDReadImported(t, c) })
}

// testNBDWriteImage writes through NBD with nbdcopy, qemu-io and fio
// (verifying), trims and zeroes, and compares with rbd export, rbd diff
// and rbd object-map check.
func testNBDWriteImage(t *testing.T, c *radostest.Cluster) {
	const size = 64 << 20
	const mib = 1 << 20
	rbdTool(t, c, "create", "--size", "64M", "rbd/w") // librbd's default features: object map, fast-diff
	s := serveImage(t, c, "--image", "rbd/w")
	uri := s.uri()
	want := make([]byte, size)
	// every ability of an image (package nbd/rbdnbd), as the CSI node's
	// devices have them
	info := runTool(t, "nbdinfo", uri)
	for _, can := range []string{"can_flush", "can_fua", "can_trim", "can_zero", "can_fast_zero", "can_multi_conn", "can_cache"} {
		if !strings.Contains(info, can+": true") {
			t.Errorf("nbdinfo of a writable image: no %s: true\n%s", can, info)
		}
	}
	if !strings.Contains(info, "is_read_only: false") || !strings.Contains(info, "base:allocation") {
		t.Errorf("nbdinfo of a writable image: not writable or no base:allocation\n%s", info)
	}

	// nbdcopy: 12 MiB + 333 bytes of random data at the start
	r := rand.New(rand.NewPCG(7, 8))
	src := make([]byte, 12*mib+333)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	srcPath := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(srcPath, src, 0o600); err != nil {
		t.Fatal(err)
	}
	runTool(t, "nbdcopy", srcPath, uri)
	copy(want, src)

	// qemu-io: aligned and unaligned patterns; objects 11 and 12 written,
	// then zeroed (may unmap) and trimmed: they must become holes
	runTool(t, "qemu-io", "-f", "raw",
		"-c", fmt.Sprintf("write -P 0xab %d %d", 20*mib, mib),
		"-c", fmt.Sprintf("write -P 0xcd %d %d", 22*mib+12345, 4567),
		"-c", fmt.Sprintf("write -P 0xee %d %d", 44*mib, 8*mib),
		"-c", fmt.Sprintf("write -z -u %d %d", 44*mib, 4*mib),
		"-c", fmt.Sprintf("discard %d %d", 48*mib, 4*mib),
		"-c", fmt.Sprintf("write -z %d %d", 60*mib, 4096), // NO_HOLE: stays allocated
		uri)
	copy(want[20*mib:21*mib], bytes.Repeat([]byte{0xab}, mib))
	copy(want[22*mib+12345:], bytes.Repeat([]byte{0xcd}, 4567))

	// fio writes 8 MiB at 32 MiB at random and verifies what it wrote
	out := runTool(t, "fio", "--name=verify", "--ioengine=nbd", "--uri="+uri, "--rw=randwrite", "--bs=4k",
		"--iodepth=16", "--offset=32M", "--size=8M", "--verify=crc32c", "--verify_fatal=1",
		"--verify_state_save=0", "--output-format=terse", "--terse-version=3")
	if f := strings.Split(strings.TrimSpace(out), ";"); len(f) < 5 || f[4] != "0" {
		t.Fatalf("fio:\n%s", out)
	}

	// block status: nbdinfo --map against rbd diff (whole objects, as the
	// object map knows them) while the image is served
	got := nbdMap(t, uri)
	oracle := librbdDiff(t, c, "rbd/w", "--whole-object")
	if fmt.Sprint(got) != fmt.Sprint(oracle) {
		t.Fatalf("nbdinfo --map data %v\nrbd diff --whole-object %v", got, oracle)
	}
	for _, hole := range []span{{44 * mib, 52 * mib}} {
		for _, d := range got {
			if d.Off < hole.End && hole.Off < d.End {
				t.Fatalf("zeroed/trimmed range %v still allocated: %v", hole, got)
			}
		}
	}
	t.Logf("nbdinfo --map = rbd diff --whole-object: %v", got)

	// everything as NBD reads it, then as librbd reads it
	viaNBD := filepath.Join(t.TempDir(), "via-nbd")
	runTool(t, "nbdcopy", uri, viaNBD)
	nbdBytes, err := os.ReadFile(viaNBD)
	if err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	exported := rbdExportBytes(t, c, "rbd/w")
	if !bytes.Equal(exported, nbdBytes) {
		t.Fatalf("rbd export and nbdcopy differ at byte %d", firstDiff(exported, nbdBytes))
	}
	copy(want[32*mib:40*mib], exported[32*mib:40*mib]) // fio's data, verified by fio
	if !bytes.Equal(exported, want) {
		t.Fatalf("rbd export differs from what was written at byte %d", firstDiff(exported, want))
	}
	diff := librbdDiff(t, c, "rbd/w")
	for _, d := range diff {
		if d.Off < 52*mib && 44*mib < d.End {
			t.Fatalf("rbd diff shows data in the zeroed/trimmed range: %v", diff)
		}
	}
	checkObjectMap(t, c, "rbd/w")
}

// testNBDReadImported reads an image made by rbd import (without an
// object map: block status from object stats), at a snapshot, and checks
// the export refuses writes.
func testNBDReadImported(t *testing.T, c *radostest.Cluster) {
	const mib = 1 << 20
	r := rand.New(rand.NewPCG(9, 10))
	data := make([]byte, 24*mib+512)
	for i := range data {
		if (i/mib)%3 != 1 { // every third MiB stays zero: holes after import
			data[i] = byte(r.Uint32())
		}
	}
	path := filepath.Join(t.TempDir(), "import")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rbdTool(t, c, "import", "--no-progress", "--image-feature", "layering", "--object-size", "1M", path, "rbd/imp")
	rbdTool(t, c, "snap", "create", "rbd/imp@s")

	s := serveImage(t, c, "--image", "rbd/imp", "--snap", "s", "-v")
	uri := s.uri()
	info := runTool(t, "nbdinfo", uri)
	if !strings.Contains(info, "is_read_only: true") || !strings.Contains(info, "can_multi_conn: true") {
		t.Fatalf("nbdinfo of a snapshot export:\n%s", info)
	}
	out := filepath.Join(t.TempDir(), "out")
	runTool(t, "nbdcopy", uri, out)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("nbdcopy of the imported image differs at byte %d (size %d, want %d)", firstDiff(got, data), len(got), len(data))
	}
	m := nbdMap(t, uri)
	oracle := librbdDiff(t, c, "rbd/imp@s")
	if fmt.Sprint(m) != fmt.Sprint(oracle) {
		t.Fatalf("nbdinfo --map data %v\nrbd diff %v", m, oracle)
	}
	if len(m) < 8 {
		t.Fatalf("expected the zero MiBs as holes, map %v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "qemu-io", "-f", "raw", "-c", "write 0 4096", uri).CombinedOutput(); err == nil && !strings.Contains(string(b), "failed") {
		t.Fatalf("write to a snapshot export succeeded:\n%s", b)
	}
	s.stop(t)
	// -v: closing, the server says what its client wrote to the OSDs (the
	// reads of 24 MiB at least, each write carrying one message or more)
	sent := regexp.MustCompile(`rados connection closed".* osd_requests=(\d+) osd_messages=(\d+) osd_writes=(\d+) osd_written_bytes=(\d+)`).FindStringSubmatch(s.stderr.String())
	if sent == nil {
		t.Fatalf("no closing line with the OSD counters:\n%s", s.stderr.String())
	}
	n := func(i int) int { v, _ := strconv.Atoi(sent[i]); return v }
	if n(2) < 24 || n(3) < 1 || n(3) > n(2) || n(4) < n(2)*73 {
		t.Fatalf("closing line's counters: %s", sent[0])
	}
}
