package rbd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Until package rados allocates self-managed snapshot ids (an MPoolOp to
// the monitors), the snapshot tests get them from librados itself through
// its Python binding: the same monitor operation librbd uses, from a real
// peer. Everything else goes through purerbd.

const pySnapScript = `
import rados, sys
c = rados.Rados(conffile=sys.argv[1])
c.connect()
io = c.open_ioctx2(int(sys.argv[2]))
if sys.argv[3] == "create":
    print(io.create_self_managed_snap())
else:
    io.remove_self_managed_snap(int(sys.argv[4]))
c.shutdown()
`

type pySnaps struct {
	objects
}

func (p pySnaps) py(ctx context.Context, args ...string) (string, error) {
	// the cluster release's own python3 and binding (a root's, whose
	// librados reads its key type)
	full := append([]string{"-c", pySnapScript, cluster.Conf, strconv.FormatInt(p.poolID(), 10)}, args...)
	out, err := cluster.Program(ctx, "/usr/bin/python3", full...)
	if err != nil {
		return "", fmt.Errorf("python3-rados %s: %w", args[0], err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (p pySnaps) allocSnap(ctx context.Context) (uint64, error) {
	out, err := p.py(ctx, "create")
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(out, 10, 64)
}

func (p pySnaps) releaseSnap(ctx context.Context, snap uint64) error {
	_, err := p.py(ctx, "remove", strconv.FormatUint(snap, 10))
	return err
}

func (p pySnaps) pool(ctx context.Context, id int64, ns string) (objects, error) {
	o, err := p.objects.pool(ctx, id, ns)
	if err != nil {
		return nil, err
	}
	return pySnaps{o}, nil
}

// openSnapT opens an image whose snapshot ids come from librados.
func openSnapT(t *testing.T, name string, opts OpenOptions) *Image {
	t.Helper()
	o, err := adapt(testPool(t))
	if err != nil {
		t.Fatal(err)
	}
	img, err := openImage(ctxT(t), pySnaps{o}, name, "", opts)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { _ = img.Close() })
	return img
}

// removeSnapT is Remove with snapshot ids released through librados.
func removeSnapT(t *testing.T, name string) error {
	o, err := adapt(testPool(t))
	if err != nil {
		t.Fatal(err)
	}
	return remove(ctxT(t), pySnaps{o}, name, RemoveOptions{})
}
