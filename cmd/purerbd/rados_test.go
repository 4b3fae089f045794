package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

func TestHexdumpLikeCeph(t *testing.T) {
	var b bytes.Buffer
	hexdump(&b, []byte("0123456789abcdefghijklmnopqrstuvwxyz"))
	want := "00000000  30 31 32 33 34 35 36 37  38 39 61 62 63 64 65 66  |0123456789abcdef|\n" +
		"00000010  67 68 69 6a 6b 6c 6d 6e  6f 70 71 72 73 74 75 76  |ghijklmnopqrstuv|\n" +
		"00000020  77 78 79 7a                                       |wxyz|\n" +
		"00000024\n"
	if b.String() != want {
		t.Fatalf("hexdump:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestHexdumpCollapsesLikeCeph checks the rows Ceph's hexdump leaves
// out: a row of one byte repeating the row before it (a run of them is
// one "*"), never the last row.
func TestHexdumpCollapsesLikeCeph(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{append([]byte{'@', 0, 0, 0}, bytes.Repeat([]byte("a"), 64)...),
			"00000000  40 00 00 00 61 61 61 61  61 61 61 61 61 61 61 61  |@...aaaaaaaaaaaa|\n" +
				"00000010  61 61 61 61 61 61 61 61  61 61 61 61 61 61 61 61  |aaaaaaaaaaaaaaaa|\n" +
				"*\n" +
				"00000040  61 61 61 61                                       |aaaa|\n" +
				"00000044\n"},
		{make([]byte, 48),
			"00000000  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n" +
				"*\n" +
				"00000020  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n" +
				"00000030\n"},
		{make([]byte, 32),
			"00000000  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n" +
				"00000010  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n" +
				"00000020\n"},
	} {
		var b bytes.Buffer
		hexdump(&b, tc.in)
		if b.String() != tc.want {
			t.Errorf("hexdump of %d bytes:\n%s\nwant:\n%s", len(tc.in), b.String(), tc.want)
		}
	}
}

// TestRadosVerbsAgainstRadosCLI runs each verb of `purerbd rados` and the
// rados tool on the same cluster: what one writes the other reads, and
// their outputs are the same line by line.
func TestRadosVerbsAgainstRadosCLI(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	ours := func(stdin string, args ...string) (string, error) {
		t.Helper()
		var out, errb bytes.Buffer
		full := append([]string{"-c", c.Conf, "-p", c.Pool}, args...)
		err := runRadosWithInput(ctx, full, strings.NewReader(stdin), &out, &errb)
		return out.String(), err
	}
	theirs := func(args ...string) (string, error) {
		t.Helper()
		out, err := c.Rados(ctx, append([]string{"-p", c.Pool}, args...)...)
		return string(out), err
	}
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(args ...string) {
		t.Helper()
		a, errA := ours("", args...)
		b, errB := theirs(args...)
		if a != b || (errA == nil) != (errB == nil) {
			t.Errorf("rados %s:\npurerbd: %q (%v)\n  rados: %q (%v)", strings.Join(args, " "), a, errA, b, errB)
		}
	}
	data := make([]byte, 9<<20+123) // more than two 4 MiB chunks
	for i := range data {
		data[i] = byte(i * 7)
	}
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	must(ours("", "put", "big", in))
	out := filepath.Join(dir, "out")
	must(theirs("get", "big", out))
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatalf("rados get of our put: %d bytes differ", len(got))
	}
	must(theirs("put", "big2", in))
	if got := must(ours("", "get", "big2", "-")); got != string(data) {
		t.Fatalf("our get of rados' put: %d bytes differ", len(got))
	}
	must(ours("tail", "put", "off", "-", "--offset", "3"))
	must(ours("", "-N", "ns1", "create", "in-ns"))
	must(ours("", "setxattr", "big", "user.a", "1"))
	must(theirs("setxattr", "big", "user.b", "22"))
	must(ours("bin\x00\x01", "setomapval", "big", "k-stdin"))
	must(theirs("setomapval", "big", "k-arg", "0123456789abcdefghij"))
	must(ours("", "setomapval", "big", "k-empty", ""))
	for _, args := range [][]string{
		{"ls"}, {"ls", "--all"}, {"-N", "ns1", "ls"},
		{"stat", "big"}, {"stat", "off"}, {"get", "off", "-"},
		{"listxattr", "big"}, {"getxattr", "big", "user.b"},
		{"listomapkeys", "big"}, {"listomapvals", "big"}, {"getomapval", "big", "k-arg"}, {"getomapval", "big", "k-empty"},
		{"stat", "missing"}, {"getomapval", "big", "missing"},
	} {
		same(args...)
	}
	must(ours("", "truncate", "big", "10"))
	same("stat", "big")
	if _, err := ours("", "create", "big"); err == nil || !strings.Contains(err.Error(), "(17) File exists") {
		t.Errorf("exclusive create of an existing object: %v", err)
	}
	must(ours("", "rmxattr", "big", "user.a"))
	must(ours("", "rmomapkey", "big", "k-arg"))
	same("listxattr", "big")
	same("listomapkeys", "big")
	must(ours("", "rm", "big", "big2", "off"))
	if _, err := ours("", "rm", "big"); err == nil || !strings.Contains(err.Error(), "(2) No such file or directory") {
		t.Errorf("rm of a missing object: %v", err)
	}
	same("ls")

	// bench: write, read back in order and at random, clean up
	w := must(ours("", "bench", "1", "write", "-t", "8", "-b", "64K", "--no-cleanup"))
	for _, line := range []string{"Total writes made:", "Bandwidth (MB/sec):", "Average IOPS:", "Average Latency(s):"} {
		if !strings.Contains(w, line) {
			t.Errorf("bench write output lacks %q:\n%s", line, w)
		}
	}
	if r := must(ours("", "bench", "1", "seq", "-t", "8")); !strings.Contains(r, "Total reads made:") {
		t.Errorf("bench seq:\n%s", r)
	}
	must(ours("", "bench", "1", "rand", "-t", "8"))
	if cl := must(ours("", "cleanup")); !strings.Contains(cl, "Removed ") {
		t.Errorf("cleanup:\n%s", cl)
	}
	if left := must(theirs("ls")); strings.Contains(left, "benchmark_data") || strings.Contains(left, benchMetaDefault) {
		t.Errorf("bench left objects:\n%s", left)
	}
}
