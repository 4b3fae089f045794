package guestbench

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestRawFile writes and reads a file through rawFile and checks the
// bytes with the os package, and the errors at and past its end.
func TestRawFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev")
	if err := os.WriteFile(path, make([]byte, 16<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := rawFile{f}
	defer r.Close()
	want := bytes.Repeat([]byte("purerbd!"), 512)
	if n, err := r.WriteAt(want, 8192); n != len(want) || err != nil {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk[8192:8192+len(want)], want) {
		t.Fatal("the file does not hold what WriteAt wrote")
	}
	got := make([]byte, len(want))
	if n, err := r.ReadAt(got, 8192); n != len(got) || err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAt = %d, %v, equal %v", n, err, bytes.Equal(got, want))
	}
	// a read across the end returns what is there and io.EOF, as
	// io.ReaderAt says
	if n, err := r.ReadAt(got, 16<<10-100); n != 100 || !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt across the end = %d, %v; want 100, EOF", n, err)
	}
	// a failing call names the call and the file
	ro := rawFile{mustOpen(t, path, os.O_RDONLY)}
	defer ro.Close()
	if _, err := ro.WriteAt(want, 0); err == nil || !bytes.Contains([]byte(err.Error()), []byte("pwrite "+path)) {
		t.Fatalf("WriteAt on a read-only descriptor = %v, want a pwrite error naming the file", err)
	}
}

func mustOpen(t *testing.T, path string, flag int) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRuntimeSyscallsWithFio checks that the guest refuses the runtime's
// system calls for a load that fio runs, before it runs anything.
func TestRuntimeSyscallsWithFio(t *testing.T) {
	err := Main(t.Context(), []string{"-fio-load", "-fio", "/bin/true", "-runtime-syscalls"})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("-fio-load and -runtime-syscalls")) {
		t.Fatalf("Main(-fio-load -runtime-syscalls) = %v, want the flags refused", err)
	}
}
