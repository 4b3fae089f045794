package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestProgressAgainstRbd: import, export, export-diff, import-diff,
// flatten and object-map check and rebuild print their progress on a terminal, ending with the line rbd ends
// with (rbd prints it to any stderr); with --no-progress, or when
// stderr is not a terminal, they print nothing.
func TestProgressAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, bytes.Repeat([]byte("purerbd "), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRbd(t, ctx, c, "create", "--size", "8M", "--image-feature", "layering", "rbd/target")
	mustRbd(t, ctx, c, "import", "--no-progress", in, "rbd/parent")
	mustRbd(t, ctx, c, "snap", "create", "rbd/parent@s")
	mustRbd(t, ctx, c, "snap", "protect", "rbd/parent@s")
	for _, who := range []string{"rbd", "purerbd"} {
		mustRbd(t, ctx, c, "clone", "rbd/parent@s", "rbd/clone-"+who)
	}
	lines := [][]string{
		{"import", in, "rbd/imp-%s"},
		{"export", "rbd/imp-%s", filepath.Join(dir, "exp-%s")},
		{"export-diff", "rbd/imp-%s", filepath.Join(dir, "diff-%s")},
		{"import-diff", filepath.Join(dir, "diff-%s"), "rbd/target"},
		{"flatten", "rbd/clone-%s"},
		{"object-map", "check", "rbd/imp-%s"},
		{"object-map", "rebuild", "rbd/imp-%s"},
	}
	last := func(s string) string {
		s = strings.TrimRight(s, "\n")
		return s[strings.LastIndexByte(s, '\r')+1:]
	}
	for _, line := range lines {
		args := func(who string) []string {
			var out []string
			for _, a := range line {
				out = append(out, strings.ReplaceAll(a, "%s", who))
			}
			return out
		}
		want := cephRbd(t, ctx, c, nil, args("rbd")...)
		if want.code != 0 || !strings.Contains(want.stderr, "complete...done.") {
			t.Fatalf("rbd %s: %d %q", strings.Join(args("rbd"), " "), want.code, want.stderr)
		}
		if line[0] == "import-diff" {
			// the target has the stream's end state now: import again
			// from the start
			mustRbd(t, ctx, c, "rm", "--no-progress", "rbd/target")
			mustRbd(t, ctx, c, "create", "--size", "8M", "--image-feature", "layering", "rbd/target")
		}
		tty, master := openPTYPair(t)
		var got bytes.Buffer
		done := make(chan struct{})
		go func() { _, _ = io.Copy(&got, master); close(done) }()
		err := execute(ctx, []string{"rbd"}, append([]string{"-c", c.Conf}, args("purerbd")...), nil, io.Discard, tty)
		_ = tty.Close()
		<-done
		if err != nil {
			t.Fatalf("purerbd rbd %s: %v", strings.Join(args("purerbd"), " "), err)
		}
		gotOut := strings.ReplaceAll(got.String(), "\r\n", "\n")
		if last(gotOut) != last(want.stderr) || strings.Count(gotOut, "% complete") < 2 {
			t.Errorf("%s: purerbd printed %q, rbd ends with %q", line[0], gotOut, last(want.stderr))
		}
	}
	// flattening an image that is no clone fails alike
	sameAsRbd(t, ctx, c, "flatten", "--no-progress", "rbd/target")
	// not a terminal, or --no-progress: nothing
	r := pureRbd(ctx, c, nil, "export", "rbd/imp-purerbd", filepath.Join(dir, "quiet"))
	tty, master := openPTYPair(t)
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&got, master); close(done) }()
	err := execute(ctx, []string{"rbd"}, []string{"-c", c.Conf, "export", "--no-progress", "rbd/imp-purerbd", "-"}, nil, io.Discard, tty)
	_ = tty.Close()
	<-done
	if err != nil || r.code != 0 || r.stderr != "" || got.Len() != 0 {
		t.Errorf("progress without a terminal %q (exit %d) or with --no-progress %q (%v)", r.stderr, r.code, got.String(), err)
	}
}
