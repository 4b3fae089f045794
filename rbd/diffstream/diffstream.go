// Package diffstream reads and writes RBD diff streams, the format of
// `rbd export-diff` and `rbd import-diff` (Ceph's doc/dev/rbd-diff.rst):
// a banner, metadata records (the snapshot the diff starts from, the
// snapshot it ends at, the image size at the end), data records (bytes
// written, ranges zeroed) and an end record. Version 1 records are a
// tag and a fixed layout; version 2 puts each record's length after
// its tag, so readers can skip tags they do not know.
package diffstream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Banners of the two versions.
const (
	BannerV1 = "rbd diff v1\n"
	BannerV2 = "rbd diff v2\n"
)

// Tag is a record's type.
type Tag byte

// Record tags.
const (
	TagFromSnap Tag = 'f'
	TagToSnap   Tag = 't'
	TagSize     Tag = 's'
	TagWrite    Tag = 'w'
	TagZero     Tag = 'z'
	TagEnd      Tag = 'e'
)

// MaxSnapName bounds a snapshot name in a stream, as rbd's reader does.
const MaxSnapName = 4096

// ErrFormat is a malformed stream.
var ErrFormat = errors.New("diffstream: malformed rbd diff stream")

// Header is a stream's metadata.
type Header struct {
	// FromSnap is the snapshot the diff starts from ("" : the image's
	// creation); ToSnap the snapshot it ends at ("": the head).
	FromSnap, ToSnap string
	// Size is the image's size at the end.
	Size uint64
}

// Writer writes a version 1 stream.
type Writer struct {
	w   io.Writer
	buf [17]byte
}

// NewWriter writes the banner and h's records.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	b := []byte(BannerV1)
	for _, s := range []struct {
		tag  Tag
		name string
	}{{TagFromSnap, h.FromSnap}, {TagToSnap, h.ToSnap}} {
		if s.name != "" {
			b = append(b, byte(s.tag))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(s.name)))
			b = append(b, s.name...)
		}
	}
	b = append(b, byte(TagSize))
	b = binary.LittleEndian.AppendUint64(b, h.Size)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return &Writer{w: w}, nil
}

func (w *Writer) extent(tag Tag, off, length uint64) error {
	w.buf[0] = byte(tag)
	binary.LittleEndian.PutUint64(w.buf[1:], off)
	binary.LittleEndian.PutUint64(w.buf[9:], length)
	_, err := w.w.Write(w.buf[:])
	return err
}

// Write records data written at off.
func (w *Writer) Write(off uint64, data []byte) error {
	if err := w.extent(TagWrite, off, uint64(len(data))); err != nil {
		return err
	}
	_, err := w.w.Write(data)
	return err
}

// Zero records [off, off+length) as zeroed.
func (w *Writer) Zero(off, length uint64) error { return w.extent(TagZero, off, length) }

// End writes the end record.
func (w *Writer) End() error {
	_, err := w.w.Write([]byte{byte(TagEnd)})
	return err
}

// Record is one record of a stream. For TagWrite, Data reads its
// Length bytes, which must be consumed (or are skipped) before the next
// call to Next.
type Record struct {
	Tag            Tag
	Name           string // TagFromSnap, TagToSnap
	Size           uint64 // TagSize
	Offset, Length uint64 // TagWrite, TagZero
	Data           io.Reader
}

// Reader reads a version 1 or 2 stream.
type Reader struct {
	r       *bufio.Reader
	v2      bool
	pending *io.LimitedReader // the unread data of the last write
	ended   bool
}

// NewReader reads the banner.
func NewReader(r io.Reader) (*Reader, error) {
	// a small buffer: data records are read straight through it
	br := bufio.NewReaderSize(r, 512)
	b := make([]byte, len(BannerV1))
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, fmt.Errorf("%w: banner: %w", ErrFormat, err)
	}
	switch string(b) {
	case BannerV1:
		return &Reader{r: br}, nil
	case BannerV2:
		return &Reader{r: br, v2: true}, nil
	}
	return nil, fmt.Errorf("%w: banner %q", ErrFormat, b)
}

// Version is the stream's version, 1 or 2.
func (r *Reader) Version() int {
	if r.v2 {
		return 2
	}
	return 1
}

func (r *Reader) u64(what string) (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r.r, b[:]); err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrFormat, what, unexpected(err))
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func (r *Reader) u32(what string) (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r.r, b[:]); err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrFormat, what, unexpected(err))
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// unexpected turns the end of the input inside a record into
// io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Next reads the next record. After the end record it returns io.EOF;
// a stream that stops before its end record is io.ErrUnexpectedEOF.
func (r *Reader) Next() (Record, error) {
	if r.ended {
		return Record{}, io.EOF
	}
	if r.pending != nil {
		if _, err := io.Copy(io.Discard, r.pending); err != nil {
			return Record{}, err
		}
		if r.pending.N > 0 {
			return Record{}, fmt.Errorf("%w: write data: %w", ErrFormat, io.ErrUnexpectedEOF)
		}
		r.pending = nil
	}
	for {
		t, err := r.r.ReadByte()
		if err != nil {
			return Record{}, fmt.Errorf("%w: tag: %w", ErrFormat, unexpected(err))
		}
		tag := Tag(t)
		if tag == TagEnd {
			r.ended = true
			return Record{Tag: TagEnd}, nil
		}
		var length uint64
		if r.v2 {
			if length, err = r.u64("record length"); err != nil {
				return Record{}, err
			}
		}
		rec, known, err := r.record(tag, length)
		if err != nil || known {
			return rec, err
		}
		if !r.v2 {
			return Record{}, fmt.Errorf("%w: unknown tag %d", ErrFormat, t)
		}
		// version 2: skip what this reader does not know
		if n, err := io.CopyN(io.Discard, r.r, int64(min(length, 1<<62))); err != nil {
			return Record{}, fmt.Errorf("%w: record %d: %d of %d bytes: %w", ErrFormat, t, n, length, unexpected(err))
		}
	}
}

// record reads the body of a record with a known tag; known is false
// for other tags. length is a version 2 record's declared length.
func (r *Reader) record(tag Tag, length uint64) (rec Record, known bool, err error) {
	rec.Tag = tag
	check := func(want uint64) error {
		if r.v2 && length != want {
			return fmt.Errorf("%w: record %q of length %d, want %d", ErrFormat, byte(tag), length, want)
		}
		return nil
	}
	switch tag {
	case TagFromSnap, TagToSnap:
		n, err := r.u32("snapshot name length")
		if err != nil {
			return rec, true, err
		}
		if n > MaxSnapName {
			return rec, true, fmt.Errorf("%w: snapshot name of %d bytes", ErrFormat, n)
		}
		if err := check(4 + uint64(n)); err != nil {
			return rec, true, err
		}
		// grown as the bytes arrive: the length is not trusted
		var b bytes.Buffer
		if _, err := io.CopyN(&b, r.r, int64(n)); err != nil {
			return rec, true, fmt.Errorf("%w: snapshot name: %w", ErrFormat, unexpected(err))
		}
		rec.Name = b.String()
	case TagSize:
		if err := check(8); err != nil {
			return rec, true, err
		}
		rec.Size, err = r.u64("size")
	case TagWrite, TagZero:
		if rec.Offset, err = r.u64("offset"); err != nil {
			return rec, true, err
		}
		if rec.Length, err = r.u64("length"); err != nil {
			return rec, true, err
		}
		if rec.Offset+rec.Length < rec.Offset || rec.Length > 1<<62 {
			return rec, true, fmt.Errorf("%w: extent %d~%d", ErrFormat, rec.Offset, rec.Length)
		}
		want := uint64(16)
		if tag == TagWrite {
			want += rec.Length
			r.pending = &io.LimitedReader{R: r.r, N: int64(rec.Length)}
			rec.Data = r.pending
		}
		err = check(want)
	default:
		return rec, false, nil
	}
	return rec, true, err
}
