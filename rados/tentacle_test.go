package rados

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestTentacle boots Ceph 20.2 (Tentacle) out of its Debian sid root
// (built once into the cache), whose keys are aes256k as Tentacle makes
// them by default and the only type a fresh Tentacle cluster allows. It
// connects in crc and in secure mode (towards mons and OSDs alike), writes
// and reads objects, and checks both directions against Tentacle's own
// rados tool. It fails when the root cannot be built.
func TestTentacle(t *testing.T) {
	cl := radostest.New(t, radostest.Options{Release: radostest.ReleaseTentacle})
	if !strings.HasPrefix(cl.AdminKey, "Ag") {
		t.Fatalf("admin key %.2s...: not an aes256k key", cl.AdminKey)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ver, err := cl.Ceph(ctx, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ver), "ceph version 20.") {
		t.Fatalf("cluster runs %q, want Ceph 20", ver)
	}
	t.Logf("%s", bytes.TrimSpace(ver))

	for _, mode := range []string{"crc", "secure"} {
		t.Run(mode, func(t *testing.T) {
			conn, err := Connect(ctx, Config{MonHost: cl.MonHost(), Key: cl.AdminKey, MonMode: mode, Mode: mode})
			if err != nil {
				t.Fatalf("connecting in %s mode: %v", mode, err)
			}
			defer conn.Close()
			io, err := conn.IOContext(ctx, cl.Pool, "")
			if err != nil {
				t.Fatal(err)
			}
			// purerbd writes, Tentacle's rados reads
			ours := bytes.Repeat([]byte("aes256k-"+mode+" "), 1000)
			oid := "tentacle-" + mode
			if err := io.WriteFull(ctx, oid, ours); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(cl.Dir, "tmp", oid)
			if _, err := cl.Rados(ctx, "-p", cl.Pool, "get", oid, out); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ours) {
				t.Fatalf("rados get: %d bytes, want the %d purerbd wrote", len(got), len(ours))
			}
			// Tentacle's rados writes, purerbd reads
			theirs := []byte(fmt.Sprintf("written by Tentacle's rados for the %s client", mode))
			in := filepath.Join(cl.Dir, "tmp", oid+".in")
			if err := os.WriteFile(in, theirs, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Rados(ctx, "-p", cl.Pool, "put", oid+"-theirs", in); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4096)
			n, err := io.Read(ctx, oid+"-theirs", buf, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:n], theirs) {
				t.Fatalf("read %q, want %q", buf[:n], theirs)
			}
		})
	}
}
