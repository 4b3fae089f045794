package cephcluster

import (
	"context"
	"strings"
	"testing"
)

// TestMissingBinaries: without Ceph on PATH the error names the fix.
func TestMissingBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), "make deps") || !strings.Contains(err.Error(), "ceph-mon") {
		t.Fatalf("Start without binaries: %v", err)
	}
}

func TestNewKeyShape(t *testing.T) {
	k, err := newKey(keyTypeAES)
	if err != nil || len(k) != 40 || !strings.HasPrefix(k, "AQ") {
		t.Fatalf("newKey(aes) = %q, %v", k, err)
	}
	// aes256k keys look like Tentacle's own: "Ag..." and 44 bytes
	k, err = newKey(keyTypeAES256K)
	if err != nil || len(k) != 60 || !strings.HasPrefix(k, "Ag") {
		t.Fatalf("newKey(aes256k) = %q, %v", k, err)
	}
}

func TestLeasePortsDistinct(t *testing.T) {
	a, err := leasePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	defer a.release()
	b, err := leasePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.release()
	seen := map[int]bool{}
	for _, p := range append(append([]int{}, a.ports...), b.ports...) {
		if seen[p] {
			t.Fatalf("port %d leased twice", p)
		}
		seen[p] = true
	}
}
