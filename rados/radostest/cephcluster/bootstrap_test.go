package cephcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// TestMkfsOSDWaitsForItsKey makes an OSD's store while the mons do not
// know its key yet, as when `osd new` answers before its key is
// committed (Ceph must be installed: make deps): mkfsOSD must wait for
// the key and start over, not fail.
func TestMkfsOSDWaitsForItsKey(t *testing.T) {
	shorttier.Skip(t, "a Ceph cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Pool: "-", ObjectStore: "memstore"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uuid, err := newUUID()
	if err != nil {
		t.Fatal(err)
	}
	key, err := newKey(c.keyType())
	if err != nil {
		t.Fatal(err)
	}
	// registered without cephx_secret: the mons have no key for osd.1
	// until the goroutine below adds it with the caps `osd new` gives
	out, err := c.Ceph(ctx, "osd", "new", uuid)
	if err != nil {
		t.Fatal(err)
	}
	if id := strings.TrimSpace(string(out)); id != "1" {
		t.Fatalf("osd new gave id %q, want 1", id)
	}
	keyring := filepath.Join(t.TempDir(), "osd.1.keyring")
	if err := writeKeyring(keyring, keyringEntry{name: "osd.1", key: key}); err != nil {
		t.Fatal(err)
	}
	added := make(chan error, 1)
	go func() {
		time.Sleep(3 * time.Second)
		_, err := c.Ceph(ctx, "auth", "add", "osd.1", "-i", keyring,
			"mon", "allow profile osd", "mgr", "allow profile osd", "osd", "allow *")
		added <- err
	}()
	if err := c.mkfsOSD(ctx, 1, key, uuid); err != nil {
		t.Fatal(err)
	}
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "osd", "ceph-1", "fsid")); err != nil {
		t.Errorf("osd.1 has no store: %v", err)
	}
}
