package nbd

import (
	"context"
	"io"
)

// zeroStep is the largest write that zeroes a range by writing.
const zeroStep = 1 << 20

// writeZeroBuffers zeroes [off, off+length) with plain writes, 1 MiB at
// a time.
func writeZeroBuffers(ctx context.Context, b Backend, pool BufferPool, off, length int64) error {
	buf := pool.Get(int(min(length, zeroStep)))
	defer pool.Put(buf)
	clear(*buf)
	return ZeroByWriting(ctx, b, *buf, off, length)
}

// ZeroByWriting zeroes [off, off+length) of b by writing zeros, a buffer
// of zero bytes, over it len(zeros) bytes at a time; the writes leave
// zeros unchanged (io.WriterAt's contract), so it may be shared. It is
// for a Zeroer asked for what it cannot do more cheaply, such as a range
// that must stay allocated (ZeroNoHole) on a backend that only
// deallocates.
func ZeroByWriting(ctx context.Context, b Backend, zeros []byte, off, length int64) error {
	if len(zeros) == 0 {
		return io.ErrShortBuffer
	}
	for length > 0 {
		n := min(length, int64(len(zeros)))
		w, err := b.WriteAt(ctx, zeros[:n], off)
		if err != nil {
			return err
		}
		if w < int(n) {
			return io.ErrShortWrite
		}
		off += n
		length -= n
	}
	return nil
}
