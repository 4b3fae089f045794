package guestio

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// WriteRandomFile creates path with n random bytes, synced, and returns
// their sha256.
func WriteRandomFile(path string, n int) (string, error) {
	data := make([]byte, n)
	rand.Read(data)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// CheckSum fails unless the file at path has the sha256 want.
func CheckSum(path, want string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%s: sha256 %s, want %s", path, got[:16], want[:16])
	}
	return nil
}

// DirectIO writes data at off with O_DIRECT (from the device's server
// back, not the page cache), syncs, and reads it back the same way.
func DirectIO(path string, data []byte, off int64) error {
	buf, err := unix.Mmap(-1, 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	copy(buf, data)
	if _, err := f.WriteAt(buf, off); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	clear(buf)
	if _, err := f.ReadAt(buf, off); err != nil {
		return err
	}
	if !bytes.Equal(buf, data) {
		return errors.New("O_DIRECT read-back differs")
	}
	return nil
}
