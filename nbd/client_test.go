package nbd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"

	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// dial connects the nbdtest client to srv and closes it at the end.
func dial(t *testing.T, srv *nbdtest.Server, o nbdtest.Options) *nbdtest.Client {
	t.Helper()
	c, err := nbdtest.Dial(context.Background(), "unix", srv.Socket, o)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClientRoundTrip(t *testing.T) {
	for _, o := range []nbdtest.Options{
		{Export: "e"},
		{Export: "e", Structured: true},
		{Export: "e", BlockStatus: true},
		{Export: "e", ExportName: true},
		{Export: "e", ExportName: true, NoZeroes: true},
	} {
		srv, _ := nbdtest.StartMemory(t, "e", 8<<20)
		c := dial(t, srv, o)
		ctx := context.Background()
		if c.Size != 8<<20 {
			t.Fatalf("%+v: size %d", o, c.Size)
		}
		data := make([]byte, 300<<10)
		rand.Read(data)
		if err := c.WriteAt(ctx, data, 12345, 0); err != nil {
			t.Fatalf("%+v: write: %v", o, err)
		}
		got := make([]byte, 1<<20)
		if err := c.ReadAt(ctx, got, 0); err != nil {
			t.Fatalf("%+v: read: %v", o, err)
		}
		want := make([]byte, 1<<20)
		copy(want[12345:], data)
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: read back differs", o)
		}
		if err := c.Flush(ctx); err != nil {
			t.Fatalf("%+v: flush: %v", o, err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("%+v: close: %v", o, err)
		}
	}
}
