package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
	"github.com/purerbd/purerbd/rbd/diffstream"
)

// `purerbd rbd export-diff` and `import-diff`: the changes between two
// points of an image's history in Ceph's rbd diff stream format
// (package rbd/diffstream), so that either end can be Ceph's rbd.

func (c *rbdCommand) exportDiffCommand() *cli.Command {
	var (
		fromSnap   string
		whole      bool
		noProgress bool
	)
	cmd := &cli.Command{
		Name: "export-diff", Summary: "export the changes since a snapshot (or the image's creation) to a file (- for stdout)",
		Args: "IMAGE[@SNAP] PATH|-", MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.exportDiff(ctx, inv.Args[0], inv.Args[1], fromSnap, whole, noProgress)
		},
	}
	cmd.String(&fromSnap, "--from-snap SNAP", "snapshot starting point")
	cmd.Bool(&whole, "--whole-object", "compare whole objects")
	noProgressOption(cmd, &noProgress)
	return cmd
}

// noProgressOption declares --no-progress.
func noProgressOption(cmd *cli.Command, p *bool) {
	cmd.Bool(p, "--no-progress", "print no progress")
}

func (c *rbdCommand) exportDiff(ctx context.Context, spec, path, fromSnap string, whole, noProgress bool) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	pr := newProgress(c.stderr, "Exporting image", noProgress)
	err = c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true, Snapshot: sp.snap}, func(img *rbd.Image) error {
		out := c.stdout
		if path != "-" {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			err = writeDiff(ctx, img, f, sp.snap, fromSnap, whole, pr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				_ = os.Remove(path)
			}
			return err
		}
		return writeDiff(ctx, img, out, sp.snap, fromSnap, whole, pr)
	})
	pr.finish(err)
	if err != nil {
		return rbdFailure(c.stderr, "export-diff", err)
	}
	return nil
}

// writeDiff writes img's changes since fromSnap as a diff stream ending
// at toSnap (the open view): data that reads as zeroes becomes a zero
// record, as rbd writes it. Several extents are read ahead.
func writeDiff(ctx context.Context, img *rbd.Image, w io.Writer, toSnap, fromSnap string, whole bool, pr *progress) error {
	size := img.Size()
	type extent struct {
		off, length int64
		exists      bool
	}
	var exts []extent
	opts := rbd.DiffOptions{FromSnap: fromSnap, WholeObject: whole, IncludeParent: true}
	err := img.Diff(ctx, 0, size, opts, func(off, length int64, exists bool) error {
		exts = append(exts, extent{off, length, exists})
		return nil
	})
	if err != nil {
		return err
	}
	dw, err := diffstream.NewWriter(w, diffstream.Header{FromSnap: fromSnap, ToSnap: toSnap, Size: uint64(size)})
	if err != nil {
		return err
	}
	type result struct {
		data []byte
		err  error
	}
	read := func(x extent) chan result {
		ch := make(chan result, 1)
		if !x.exists {
			ch <- result{}
			return ch
		}
		go func() {
			buf := make([]byte, x.length)
			_, err := img.ReadAtContext(ctx, buf, x.off)
			if err == io.EOF {
				err = nil
			}
			ch <- result{buf, err}
		}()
		return ch
	}
	const depth = 8
	var pending []chan result
	next := 0
	for ; next < len(exts) && next < depth; next++ {
		pending = append(pending, read(exts[next]))
	}
	for i := range exts {
		r := <-pending[0]
		pending = pending[1:]
		if next < len(exts) {
			pending = append(pending, read(exts[next]))
			next++
		}
		if r.err != nil {
			return r.err
		}
		x := exts[i]
		if r.data != nil && !isZero(r.data) {
			err = dw.Write(uint64(x.off), r.data)
		} else {
			err = dw.Zero(uint64(x.off), uint64(x.length))
		}
		if err != nil {
			return err
		}
		pr.update(uint64(x.off), uint64(size))
	}
	return dw.End()
}

// isZero reports whether p holds only zero bytes.
func isZero(p []byte) bool {
	var zero [4096]byte
	for len(p) > 0 {
		n := min(len(p), len(zero))
		if !bytes.Equal(p[:n], zero[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}

func (c *rbdCommand) importDiffCommand() *cli.Command {
	var noProgress bool
	cmd := &cli.Command{
		Name: "import-diff", Summary: "apply a diff exported by export-diff (- for stdin) to an image",
		Args: "PATH|- IMAGE", MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return c.importDiff(ctx, inv.Args[0], inv.Args[1], noProgress)
		},
	}
	noProgressOption(cmd, &noProgress)
	return cmd
}

func (c *rbdCommand) importDiff(ctx context.Context, path, spec string, noProgress bool) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	if sp.snap != "" {
		return cli.Usagef(cli.BadArgument, "import-diff: %q: the image spec takes no snapshot", spec)
	}
	in := c.stdin
	var inSize int64
	var pos *countingReader
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return rbdFailure(c.stderr, "import-diff", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			inSize = st.Size()
		}
		pos = &countingReader{r: f}
		in = pos
	}
	pr := newProgress(c.stderr, "Importing image diff", noProgress)
	err = c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
		return applyDiff(ctx, img, in, func(off uint64) {
			if pos != nil {
				pr.update(uint64(pos.n), uint64(inSize))
			} else {
				pr.update(off, uint64(img.Size()))
			}
		})
	})
	pr.finish(err)
	if err != nil {
		return rbdFailure(c.stderr, "import-diff", err)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Errors of import-diff that rbd reports with their own errno.
var (
	errFromSnapMissing = fmt.Errorf("%w: the diff's start snapshot does not exist in the image", rbd.ErrInvalid)
	errToSnapExists    = fmt.Errorf("%w: the diff's end snapshot already exists", rbd.ErrExists)
)

// applyDiff applies a diff stream to img as rbd import-diff does: the
// start snapshot must exist in the image, the end snapshot must not
// (it is created once the stream has been applied), the image is
// resized to the stream's size, data is written and zeroed ranges
// discarded.
func applyDiff(ctx context.Context, img *rbd.Image, in io.Reader, progress func(off uint64)) error {
	r, err := diffstream.NewReader(in)
	if err != nil {
		return err
	}
	snaps, err := img.Snapshots(ctx)
	if err != nil {
		return err
	}
	hasSnap := func(name string) bool {
		for _, s := range snaps {
			if s.Name == name {
				return true
			}
		}
		return false
	}
	var toSnap string
	buf := make([]byte, ioChunk)
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch rec.Tag {
		case diffstream.TagFromSnap:
			if !hasSnap(rec.Name) {
				return fmt.Errorf("%w: %q", errFromSnapMissing, rec.Name)
			}
		case diffstream.TagToSnap:
			if hasSnap(rec.Name) {
				return fmt.Errorf("%w: %q", errToSnapExists, rec.Name)
			}
			toSnap = rec.Name
		case diffstream.TagSize:
			if uint64(img.Size()) != rec.Size {
				if err := img.Resize(ctx, int64(rec.Size)); err != nil {
					return err
				}
			}
		case diffstream.TagWrite:
			for done := uint64(0); done < rec.Length; {
				n := min(uint64(len(buf)), rec.Length-done)
				if _, err := io.ReadFull(rec.Data, buf[:n]); err != nil {
					return fmt.Errorf("%w: write data: %w", diffstream.ErrFormat, err)
				}
				if _, err := img.WriteAtContext(ctx, buf[:n], int64(rec.Offset+done)); err != nil {
					return err
				}
				done += n
			}
			progress(rec.Offset)
		case diffstream.TagZero:
			if err := img.Discard(ctx, int64(rec.Offset), int64(rec.Length)); err != nil {
				return err
			}
			progress(rec.Offset)
		}
	}
	if toSnap != "" {
		return img.CreateSnapshot(ctx, toSnap)
	}
	return nil
}
