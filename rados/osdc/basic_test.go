package osdc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/radostest"
)

func TestWriteReadEndToEnd(t *testing.T) {
	tc := connect(t, cluster, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("purerbd-osdc "), 1000)
	if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "e2e-1", Ops: []OSDOp{WriteFull(data)}}); err != nil {
		t.Fatalf("writefull: %v", err)
	}
	rep, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "e2e-1", Ops: []OSDOp{Read(0, 0), Stat()}})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(rep.Ops[0].OutData, data) {
		t.Fatalf("read %d bytes, want %d identical", len(rep.Ops[0].OutData), len(data))
	}
	size, _, err := ParseStat(rep.Ops[1].OutData)
	if err != nil || size != uint64(len(data)) {
		t.Fatalf("stat: size %d, %v", size, err)
	}
	// the rados CLI sees the same bytes
	out := filepath.Join(t.TempDir(), "obj")
	if _, err := cluster.Rados(ctx, "-p", cluster.Pool, "get", "e2e-1", out); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, data) {
		t.Fatalf("rados get: %d bytes differ", len(got))
	}
	// a missing object is ENOENT
	_, err = tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "e2e-missing", Ops: []OSDOp{Read(0, 0)}})
	if !errors.Is(err, syscall.ENOENT) || !errors.Is(err, ENOENT) {
		t.Fatalf("read of a missing object: %v, want ENOENT", err)
	}
}

// TestSecureMode: on a cluster that allows only secure mode, OSD sessions
// negotiate AES-GCM and carry requests (a 5 MiB write spans many
// segments of the secure framing).
func TestSecureMode(t *testing.T) {
	c := radostest.New(t, radostest.Options{Mode: radostest.ModeSecure})
	tc := connect(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 5<<20/7)
	if _, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "secure", Ops: []OSDOp{WriteFull(data)}}); err != nil {
		t.Fatal(err)
	}
	rep, err := tc.ob.Do(ctx, &Request{Pool: tc.pool, OID: "secure", Ops: []OSDOp{Read(0, 0)}})
	if err != nil || !bytes.Equal(rep.Ops[0].OutData, data) {
		t.Fatalf("read back: %v", err)
	}
	s, err := tc.ob.session(rep.OSD)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.currentConn().Mode(); m != msgr.ConnModeSecure {
		t.Fatalf("OSD session mode %s, want secure", m)
	}
}
