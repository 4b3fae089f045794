package nbd

import (
	"context"
	"io"
)

// writeZeroBuffers zeroes [off, off+length) with plain writes, 1 MiB at
// a time.
func writeZeroBuffers(ctx context.Context, b Backend, pool *bufferPool, off, length int64) error {
	const step = 1 << 20
	buf := pool.get(int(min(length, step)))
	defer pool.put(buf)
	z := *buf
	clear(z)
	for length > 0 {
		n := min(length, int64(len(z)))
		w, err := b.WriteAt(ctx, z[:n], off)
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
