package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, label: "Exporting image", last: -1}
	for i := uint64(0); i <= 200; i++ {
		p.update(i, 200)
	}
	p.finish(nil)
	if got := b.String(); !bytes.HasPrefix(b.Bytes(), []byte("\rExporting image: 0% complete...\rExporting image: 1% complete...")) ||
		!bytes.HasSuffix(b.Bytes(), []byte("\rExporting image: 100% complete...\rExporting image: 100% complete...done.\n")) ||
		bytes.Count(b.Bytes(), []byte("\r")) != 102 {
		t.Errorf("progress output %q", got)
	}
	b.Reset()
	p = &progress{w: &b, label: "Importing image diff", last: -1}
	p.update(1, 4)
	p.finish(errors.New("x"))
	if got := b.String(); got != "\rImporting image diff: 25% complete...\rImporting image diff: 25% complete...failed.\n" {
		t.Errorf("failed progress %q", got)
	}
	// not a terminal: silent; --no-progress: silent
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if newProgress(f, "x", false).w != nil || newProgress(&b, "x", false).w != nil {
		t.Error("progress on a file")
	}
	tty := openPTY(t)
	if newProgress(tty, "x", false).w == nil || newProgress(tty, "x", true).w != nil {
		t.Error("no progress on a terminal, or progress with --no-progress")
	}
}

// openPTY opens the terminal side of a new pseudo-terminal.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	s, _ := openPTYPair(t)
	return s
}

// openPTYPair opens a new pseudo-terminal: its terminal side and its
// master (which reads what is written to the terminal).
func openPTYPair(t *testing.T) (tty, master *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, m
}
