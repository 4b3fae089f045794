package rados

import (
	"testing"

	"github.com/purerbd/purerbd/rados/osdc"
)

// TestWithFullTry checks that a full-try copy marks every request, leaves
// the objecter to derive read or write from the ops, and leaves the
// original unmarked.
func TestWithFullTry(t *testing.T) {
	io := &IOContext{pool: 1}
	ft := io.WithFullTry()
	for _, ops := range [][]osdc.OSDOp{{osdc.Delete()}, {osdc.ListSnaps()}} {
		r := ft.request("o", 0, ops)
		if r.Flags != osdc.FlagFullTry {
			t.Errorf("full try, %v: flags %#x, want %#x", ops[0].Code, r.Flags, osdc.FlagFullTry)
		}
		if r := io.request("o", 0, ops); r.Flags != 0 {
			t.Errorf("original, %v: flags %#x", ops[0].Code, r.Flags)
		}
	}
	if r := ft.request("o", osdc.FlagWrite, []osdc.OSDOp{osdc.Delete()}); r.Flags != osdc.FlagWrite|osdc.FlagFullTry {
		t.Errorf("full try write: flags %#x", r.Flags)
	}
}
