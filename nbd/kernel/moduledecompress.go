package kernel

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// ErrModuleTooLarge means a module file, or what it decompresses to, is
// beyond 64 MiB: no real module is, so the file is not one.
var ErrModuleTooLarge = errors.New("kernel module larger than 64 MiB")

// ModuleDecompressError means a compressed module file that the kernel
// could not take as it is could not be decompressed here either.
type ModuleDecompressError struct {
	Path        string
	Compression string // "xz", "zstd" or "gzip"
	Err         error
}

func (e *ModuleDecompressError) Error() string {
	return fmt.Sprintf("module %s: decompress %s: %v", e.Path, e.Compression, e.Err)
}

func (e *ModuleDecompressError) Unwrap() error { return e.Err }

// decompressModule returns the module image a compressed module file
// holds, never more than limit bytes (maxModuleSize for a real load), and
// never asking more memory of the decoders than that: an xz file's dictionary size is
// checked before its decoder allocates it (see xzCheck), zstd's window
// and output are capped by its decoder's options.
func decompressModule(b []byte, comp string, limit int64) ([]byte, error) {
	switch comp {
	case compressionGzip:
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return readAllBounded(zr, 0, limit)
	case compressionXZ:
		size, _, err := xzCheck(b, limit)
		if err != nil {
			return nil, err
		}
		cfg := xz.ReaderConfig{SingleStream: true}
		zr, err := cfg.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return readAllBounded(zr, size, limit)
	case compressionZstd:
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderMaxWindow(uint64(max(limit, zstd.MinWindowSize))))
		if err != nil {
			return nil, err
		}
		defer dec.Close()
		out, err := dec.DecodeAll(b, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, ErrModuleTooLarge
		}
		if err != nil {
			return nil, err
		}
		if int64(len(out)) > limit {
			return nil, ErrModuleTooLarge
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown compression %q", comp)
}

// readAllBounded reads r to its end into a buffer of sizeHint bytes
// (grown when the hint is short), failing beyond limit.
func readAllBounded(r io.Reader, sizeHint, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if sizeHint > 0 && sizeHint <= limit {
		buf.Grow(int(sizeHint) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, ErrModuleTooLarge
	}
	return buf.Bytes(), nil
}
