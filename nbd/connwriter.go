package nbd

import (
	"io"

	"github.com/purerbd/purerbd/internal/rawsock"
)

// connWriterSize is how much a connWriter buffers.
const connWriterSize = 64 << 10

// connWriter buffers what a session sends, like a bufio.Writer, except
// that what does not fit is not copied through the buffer: on a raw
// socket the buffered bytes and the new ones go out together in one
// writev, so a large READ reply is sent straight from where its data is
// (a Memory's chunks, a payload buffer). Errors are sticky. One goroutine
// writes at a time.
type connWriter struct {
	buf []byte
	w   io.Writer
	raw *rawsock.Writer // nil: every write goes to w
	vec [][]byte        // scratch for Write
	err error
}

func newConnWriter(w io.Writer, raw *rawsock.Writer) *connWriter {
	return &connWriter{buf: make([]byte, 0, connWriterSize), w: w, raw: raw}
}

// Buffered is the number of bytes not sent yet.
func (cw *connWriter) Buffered() int { return len(cw.buf) }

// Write buffers p, or sends it with what is buffered when it does not fit.
func (cw *connWriter) Write(p []byte) (int, error) {
	if len(cw.buf)+len(p) <= cap(cw.buf) {
		if cw.err != nil {
			return 0, cw.err
		}
		cw.buf = append(cw.buf, p...)
		return len(p), nil
	}
	cw.vec = append(cw.vec[:0], p)
	err := cw.WriteVec(cw.vec)
	cw.vec[0] = nil
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteVec writes the slices of vec in order after what is buffered:
// into the buffer when they all fit, otherwise they are sent, with the
// buffered bytes, before WriteVec returns, and are not referenced after.
func (cw *connWriter) WriteVec(vec [][]byte) error {
	if cw.err != nil {
		return cw.err
	}
	total := 0
	for _, b := range vec {
		total += len(b)
	}
	if len(cw.buf)+total > cap(cw.buf) && total <= cap(cw.buf)/2 {
		// Small: copied after a flush, so that the kernel reads only
		// the buffer (see readMemory).
		if err := cw.Flush(); err != nil {
			return err
		}
	}
	if len(cw.buf)+total <= cap(cw.buf) {
		for _, b := range vec {
			cw.buf = append(cw.buf, b...)
		}
		return nil
	}
	if cw.raw != nil {
		cw.err = cw.raw.Writev(cw.buf, vec)
		cw.buf = cw.buf[:0]
		return cw.err
	}
	if err := cw.Flush(); err != nil {
		return err
	}
	for _, b := range vec {
		if len(b) >= cap(cw.buf)/2 {
			if err := cw.Flush(); err != nil {
				return err
			}
			if _, err := cw.w.Write(b); err != nil {
				cw.err = err
				return err
			}
			continue
		}
		if len(cw.buf)+len(b) > cap(cw.buf) {
			if err := cw.Flush(); err != nil {
				return err
			}
		}
		cw.buf = append(cw.buf, b...)
	}
	return nil
}

// Flush sends what is buffered.
func (cw *connWriter) Flush() error {
	if cw.err != nil {
		return cw.err
	}
	if len(cw.buf) == 0 {
		return nil
	}
	_, err := cw.w.Write(cw.buf)
	cw.buf = cw.buf[:0]
	cw.err = err
	return err
}
