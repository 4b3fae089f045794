package main

import (
	"bufio"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDWatchAgainstRbd runs Ceph's rbd watch and purerbd's on the same
// image, makes librbd notify the header (a resize, a snapshot; and
// rados notify with a payload librbd does not know) and
// compares what both printed, the numbers (notify ids, cookies, client
// ids) aside; both end on end of file on stdin. A missing image fails
// alike.
func TestRBDWatchAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mustRbd(t, ctx, c, "create", "--size", "8M", "rbd/w")
	sameAsRbd(t, ctx, c, "watch", "rbd/nosuch")
	sameAsRbd(t, ctx, c, "watch", "rbd/w@s")

	// Ceph's rbd watch
	cmd := c.ToolCommand(ctx, "rbd", "watch", "rbd/w")
	cephIn, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cephOut, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var cephErr strings.Builder
	cmd.Stderr = &cephErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cephLines := readLines(cephOut)

	// purerbd's
	pureIn, pureInW := io.Pipe()
	pureOutR, pureOut := io.Pipe()
	var pureErr strings.Builder
	pureDone := make(chan error, 1)
	go func() {
		err := execute(ctx, []string{"rbd"}, []string{"-c", c.Conf, "watch", "rbd/w"}, pureIn, pureOut, &pureErr)
		_ = pureOut.Close()
		pureDone <- err
	}()
	pureLines := readLines(pureOutR)

	for who, lines := range map[string]<-chan string{"rbd": cephLines, "purerbd": pureLines} {
		select {
		case l := <-lines:
			if l != "press enter to exit..." {
				t.Fatalf("%s watch began with %q", who, l)
			}
		case <-ctx.Done():
			t.Fatalf("%s watch printed nothing (stderr %s%s)", who, cephErr.String(), pureErr.String())
		}
	}
	// librbd's notifications wait for every watcher's acknowledgement,
	// which both send after printing
	mustRbd(t, ctx, c, "resize", "--size", "16M", "rbd/w")
	mustRbd(t, ctx, c, "snap", "create", "rbd/w@s")
	// a payload librbd does not know
	mustRados(t, ctx, c, "-p", "rbd", "notify", "rbd_header."+imageID(t, ctx, c, "rbd/w"), "hello")

	_ = cephIn.Close()
	_ = pureInW.Close()
	numbers := regexp.MustCompile(`(notify_id|cookie|notifier_id)=\d+`)
	shape := func(lines <-chan string) []string {
		var out []string
		for l := range lines {
			out = append(out, numbers.ReplaceAllString(l, "$1=N"))
		}
		return out
	}
	// read to the end before Wait closes the pipe
	want, got := shape(cephLines), shape(pureLines)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("rbd watch: %v: %s", err, cephErr.String())
	}
	if err := <-pureDone; err != nil {
		t.Fatalf("purerbd rbd watch: %v: %s", err, pureErr.String())
	}
	if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("purerbd rbd watch printed\n%s\nrbd watch printed\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(cephErr.String(), "failed to decode") != strings.Contains(pureErr.String(), "failed to decode") {
		t.Errorf("purerbd rbd watch's stderr %q, rbd watch's %q", pureErr.String(), cephErr.String())
	}
	line := regexp.MustCompile(`^w received notification: notify_id=N, cookie=N, notifier_id=N, bl.length=\d+, notify_op=\w+( \(\d+\))?$`)
	for _, l := range got {
		if !line.MatchString(l) {
			t.Errorf("unexpected line %q", l)
		}
	}
}

// readLines delivers r's lines until it ends.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		s := bufio.NewScanner(r)
		for s.Scan() {
			ch <- s.Text()
		}
	}()
	return ch
}
