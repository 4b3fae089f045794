package main

import (
	"context"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/radostest"
)

// TestRBDListLongAgainstRbd compares rbd ls -l, plain and JSON, with
// Ceph's on one pool and a namespace: an image with snapshots (one
// protected), a clone of it and a snapshot of the clone (their parent),
// an image under an exclusive and one under a shared lock (rbd lock
// add), an image in the trash (not listed), and an empty namespace.
func TestRBDListLongAgainstRbd(t *testing.T) {
	c := radostest.New(t, radostest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"namespace", "create", "rbd/ns1"},
		{"namespace", "create", "rbd/empty"},
		{"create", "--size", "4M", "rbd/base"},
		{"snap", "create", "rbd/base@s1"},
		{"snap", "create", "rbd/base@s2"},
		{"snap", "protect", "rbd/base@s2"},
		{"clone", "rbd/base@s2", "rbd/clone"},
		{"snap", "create", "rbd/clone@c1"},
		{"clone", "--rbd-default-clone-format=2", "rbd/base@s2", "rbd/ns1/nsclone"},
		{"resize", "--size", "8M", "rbd/clone"},
		{"create", "--size", "1G", "rbd/big"},
		{"lock", "add", "rbd/big", "mine"},
		{"create", "--size", "2M", "rbd/shared"},
		{"lock", "add", "--shared", "tag1", "rbd/shared", "a"},
		{"lock", "add", "--shared", "tag1", "rbd/shared", "b"},
		{"create", "--size", "1M", "rbd/gone"},
		{"trash", "mv", "rbd/gone"},
	} {
		mustRbd(t, ctx, c, args...)
	}
	for _, args := range [][]string{
		{"ls", "-l"},
		{"ls", "-l", "--format", "json"},
		{"ls", "--long", "--format", "json", "--pretty-format"},
		{"ls", "-l", "rbd/ns1"},
		{"ls", "-l", "--format", "json", "rbd/ns1"},
		{"ls", "-l", "rbd/empty"},
		{"ls", "-l", "--format", "json", "rbd/empty"},
		{"ls", "-l", "nosuchpool"},
	} {
		sameAsRbd(t, ctx, c, args...)
	}
}
