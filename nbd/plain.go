package nbd

import (
	"context"
	"fmt"
)

// Optional abilities in standard types only. A package that must not
// import nbd (package rbd: its Image is served by nbd without either
// importing the other) cannot return Extent or take ZeroFlags, so the
// server also recognises these method sets, on a backend or on the value
// Adapt wrapped. The typed interfaces (Zeroer, BlockStatuser) win when a
// value has both.

// HoleZeroer makes a range read as zeroes and may deallocate it
// (*rbd.Image has it). The server calls it for NBD_CMD_WRITE_ZEROES
// without NBD_CMD_FLAG_NO_HOLE, fast zeroes included (deallocating is
// taken to be faster than writing); with NO_HOLE it writes zero buffers
// instead, and refuses a fast zero.
type HoleZeroer interface {
	WriteZeroes(ctx context.Context, off, length int64) error
}

// AllocationReporter reports allocation (*rbd.Image has it): it calls fn
// for consecutive extents from off, in order, each allocated (may hold
// data) or not (a hole that reads as zeroes); they cover at least one
// byte and may stop before off+length. An error from fn must stop the
// walk and be returned.
//
// The server answers NBD_CMD_BLOCK_STATUS with it (a hole is
// NBD_STATE_HOLE|NBD_STATE_ZERO), but does not consult it for structured
// reads: finding out may cost the backend a round trip, which a read
// should not pay twice.
type AllocationReporter interface {
	AllocatedExtents(ctx context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error
}

// reportedStatus is a BlockStatuser on top of an AllocationReporter.
type reportedStatus struct{ r AllocationReporter }

func (s reportedStatus) BlockStatus(ctx context.Context, off, length int64) ([]Extent, error) {
	var out []Extent
	pos := off
	err := s.r.AllocatedExtents(ctx, off, length, func(o, n int64, allocated bool) error {
		if o != pos || n <= 0 {
			return fmt.Errorf("nbd: allocation reported at %d+%d, expected an extent at %d", o, n, pos)
		}
		pos += n
		flags := ExtentFlags(0)
		if !allocated {
			flags = ExtentHole | ExtentZero
		}
		if k := len(out); k > 0 && out[k-1].Flags == flags {
			out[k-1].Length += n
		} else {
			out = append(out, Extent{Length: n, Flags: flags})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
