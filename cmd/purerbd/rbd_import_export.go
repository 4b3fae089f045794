package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd import` and `export`: whole images from and to files or
// standard input and output, several chunks in flight.

// ioChunk is the unit import, export and bench move.
const ioChunk = 4 << 20

func (c *rbdCommand) importCommand() *cli.Command {
	var cf createFlags
	cache := true
	var noProgress bool
	cmd := &cli.Command{
		Name: "import", Summary: "create an image from a file (- for stdin)", Args: "PATH|- IMAGE", MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			pr := newProgress(c.stderr, "Importing image", noProgress)
			err := c.importImage(ctx, inv.Args[0], inv.Args[1], &cf, cache, pr)
			pr.finish(err)
			return err
		},
	}
	cf.register(cmd)
	cacheOption(cmd, &cache)
	noProgressOption(cmd, &noProgress)
	return cmd
}

func (c *rbdCommand) importImage(ctx context.Context, path, spec string, cf *createFlags, cache bool, pr *progress) error {
	opts, err := cf.options()
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	in := c.stdin
	var size int64 = -1
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if st.Mode().IsRegular() {
			size = st.Size()
		}
		in = f
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		initial := size
		if initial < 0 {
			initial = 0
		}
		if err := rbd.Create(ctx, ioc, sp.name, initial, opts); err != nil {
			return err
		}
		img, err := rbd.Open(ctx, ioc, sp.name, rbd.OpenOptions{WriteAround: cliWriteAround(cache)})
		if err != nil {
			return err
		}
		n, err := copyIn(ctx, img, in, size < 0, func(done int64) {
			if size > 0 {
				pr.update(uint64(done), uint64(size))
			}
		})
		if err == nil && size < 0 && img.Size() != n {
			err = img.Resize(ctx, n)
		}
		// Close flushes the cache: a write that failed behind it is
		// reported here
		if cerr := img.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// copyIn writes r into img chunk by chunk, several chunks in flight,
// skipping all-zero chunks (the image reads zeros there anyway); grow
// resizes the image as data arrives (input of unknown size); progress
// hears how many bytes were read.
func copyIn(ctx context.Context, img *rbd.Image, r io.Reader, grow bool, progress func(done int64)) (int64, error) {
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		werr    error
		sem     = make(chan struct{}, 8)
		off     int64
	)
	zero := make([]byte, ioChunk)
	for {
		buf := make([]byte, ioChunk)
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if grow && off+int64(n) > img.Size() {
				wg.Wait()
				if werr != nil {
					return off, werr
				}
				if err := img.Resize(ctx, max(off+int64(n), 2*img.Size())); err != nil {
					return off, err
				}
			}
			if !bytes.Equal(buf[:n], zero[:n]) {
				sem <- struct{}{}
				wg.Add(1)
				go func(p []byte, at int64) {
					defer func() { <-sem; wg.Done() }()
					if _, err := img.WriteAtContext(ctx, p, at); err != nil {
						errOnce.Do(func() { werr = err })
					}
				}(buf[:n], off)
			}
			off += int64(n)
			progress(off)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			wg.Wait()
			return off, rerr
		}
	}
	wg.Wait()
	return off, werr
}

func (c *rbdCommand) exportCommand() *cli.Command {
	var noProgress bool
	cmd := &cli.Command{
		Name: "export", Summary: "write an image (or a snapshot) to a file (- for stdout)", Args: "IMAGE[@SNAP] PATH|-",
		MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			pr := newProgress(c.stderr, "Exporting image", noProgress)
			err := c.exportImage(ctx, inv.Args[0], inv.Args[1], pr)
			pr.finish(err)
			return err
		},
	}
	noProgressOption(cmd, &noProgress)
	return cmd
}

func (c *rbdCommand) exportImage(ctx context.Context, spec, path string, pr *progress) error {
	sp, err := c.parseSpec(spec, false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true, Snapshot: sp.snap}, func(img *rbd.Image) error {
		var out io.Writer = c.stdout
		var file *os.File
		if path != "-" {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			out, file = f, f
		}
		if err := copyOut(ctx, img, out, file, pr); err != nil {
			return err
		}
		if file != nil {
			if err := file.Truncate(img.Size()); err != nil {
				return err
			}
			return file.Close()
		}
		return nil
	})
}

// copyOut reads img in chunks (several in flight) and writes them in
// order; with a file, all-zero chunks become holes.
func copyOut(ctx context.Context, img *rbd.Image, w io.Writer, f *os.File, pr *progress) error {
	size := img.Size()
	type result struct {
		buf []byte
		err error
	}
	const depth = 8
	var chunks []chan result
	start := func(off int64) chan result {
		ch := make(chan result, 1)
		go func() {
			buf := make([]byte, min(ioChunk, size-off))
			_, err := img.ReadAtContext(ctx, buf, off)
			if err == io.EOF {
				err = nil
			}
			ch <- result{buf, err}
		}()
		return ch
	}
	next := int64(0)
	for ; next < size && len(chunks) < depth; next += ioChunk {
		chunks = append(chunks, start(next))
	}
	zero := make([]byte, ioChunk)
	for off := int64(0); len(chunks) > 0; {
		r := <-chunks[0]
		chunks = chunks[1:]
		if r.err != nil {
			return r.err
		}
		if f != nil && bytes.Equal(r.buf, zero[:len(r.buf)]) {
			if _, err := f.Seek(int64(len(r.buf)), io.SeekCurrent); err != nil {
				return err
			}
		} else if _, err := w.Write(r.buf); err != nil {
			return err
		}
		off += int64(len(r.buf))
		pr.update(uint64(off), uint64(size))
		if next < size {
			chunks = append(chunks, start(next))
			next += ioChunk
		}
	}
	return nil
}
