package main

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd cp` and `rbd deep cp`: copy an image (or a snapshot of
// it) into a new one, its layout and metadata with it, as librbd's copy
// and deep_copy do. cp writes the source's data as it reads, leaving out
// every zeroed --sparse-size block; deep cp also keeps the snapshots,
// writing each one's changes from the one before and taking it again on
// the copy, with its protection.

// copySparseSize is rbd's default --sparse-size.
const copySparseSize = 4096

func (c *rbdCommand) copyCommand() *cli.Command {
	var (
		cf         createFlags
		noProgress bool
		sparse     int64 = copySparseSize
	)
	cmd := &cli.Command{
		Name: "cp", Aliases: []string{"copy"}, Summary: "copy an image (or a snapshot) into a new image",
		Args: "SRC[@SNAP] DEST", MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			pr := newProgress(c.stderr, "Image copy", noProgress)
			err := c.copyImage(ctx, inv.Args[0], inv.Args[1], &cf, sparse, false, pr)
			pr.finish(err)
			if err != nil {
				return rbdFailure(c.stderr, "copy", err)
			}
			return nil
		},
	}
	cf.register(cmd)
	cmd.Func("--sparse-size SIZE", "leave out zeroed blocks of this size (default 4K)", func(v []string) error {
		n, err := cli.ParseSize(v[0], 1)
		if err != nil || n < 4096 || n&(n-1) != 0 {
			return fmt.Errorf("--sparse-size %q: want a power of two of at least 4K", v[0])
		}
		sparse = n
		return nil
	})
	noProgressOption(cmd, &noProgress)
	return cmd
}

func (c *rbdCommand) deepCommand() *cli.Command {
	var (
		cf         createFlags
		noProgress bool
	)
	cp := &cli.Command{
		Name: "cp", Aliases: []string{"copy"}, Summary: "copy an image with its snapshots into a new image",
		Args: "SRC[@SNAP] DEST", MinArgs: 2, MaxArgs: 2,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			pr := newProgress(c.stderr, "Image deep copy", noProgress)
			err := c.copyImage(ctx, inv.Args[0], inv.Args[1], &cf, copySparseSize, true, pr)
			pr.finish(err)
			if err != nil {
				return rbdFailure(c.stderr, "deep copy", err)
			}
			return nil
		},
	}
	cf.register(cp)
	noProgressOption(cp, &noProgress)
	group := &cli.Command{Name: "deep", Summary: "deep copy: cp"}
	return group.Add(cp)
}

// copyImage creates dstSpec shaped as srcSpec (unless the options say
// otherwise) and copies into it: the head or the snapshot named, or with
// deep every snapshot up to it.
func (c *rbdCommand) copyImage(ctx context.Context, srcSpec, dstSpec string, cf *createFlags, sparse int64, deep bool, pr *progress) error {
	src, err := c.parseSpec(srcSpec, false)
	if err != nil {
		return err
	}
	dst, err := c.parseSpec(dstSpec, false)
	if err != nil {
		return err
	}
	if dst.snap != "" {
		return cli.Usagef(cli.BadArgument, "destination snapshot name specified for a command that doesn't use it")
	}
	opts, err := cf.options()
	if err != nil {
		return err
	}
	snap := src.snap
	src.snap = ""
	return c.withImage(ctx, src, rbd.OpenOptions{ReadOnly: true}, func(head *rbd.Image) error {
		info, err := head.Stat(ctx)
		if err != nil {
			return err
		}
		stages, err := copyStages(info, snap, deep)
		if err != nil {
			return err
		}
		if info.Parent != nil && deep {
			return fmt.Errorf("%w: deep copy of a clone (it would keep the parent link, which purerbd does not do; rbd cp copies a clone's data)",
				rbd.ErrUnsupportedFeature)
		}
		if opts.Order == 0 {
			opts.Order = info.Order
		}
		if opts.Features == 0 {
			opts.Features = info.Features &^ (rbd.FeatureOperations | rbd.FeatureDataPool | rbd.FeatureStripingV2)
			if opts.Features == 0 {
				opts.Features = rbd.FeatureNone
			}
		}
		// as librbd: the source's striping unless given, even with another
		// object size (which it may then not divide: EINVAL)
		if opts.StripeUnit == 0 {
			opts.StripeUnit = info.ObjectSize
			if info.Features&rbd.FeatureStripingV2 != 0 {
				opts.StripeUnit = info.StripeUnit
			}
		}
		if opts.StripeCount == 0 {
			opts.StripeCount = 1
			if info.Features&rbd.FeatureStripingV2 != 0 {
				opts.StripeCount = info.StripeCount
			}
		}
		meta, err := head.MetadataList(ctx)
		if err != nil {
			return err
		}
		return c.withPool(ctx, dst, func(dioc *rados.IOContext) error {
			if err := rbd.Create(ctx, dioc, dst.name, stages[0].size, opts); err != nil {
				return err
			}
			out, err := rbd.Open(ctx, dioc, dst.name, rbd.OpenOptions{})
			if err != nil {
				return err
			}
			err = copyInto(ctx, c.radosConn, src, head, out, meta, stages, sparse, pr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			return err
		})
	})
}

// copyStage is one state of the source to copy: a snapshot ("" for the
// head) and its size; take is set when the copy takes the snapshot too.
type copyStage struct {
	snap      string
	size      int64
	take      bool
	protected bool
}

// copyStages lists what to copy: the snapshot named (or the head), and
// with deep every user snapshot before it, oldest first.
func copyStages(info rbd.Info, snap string, deep bool) ([]copyStage, error) {
	last := copyStage{size: info.Size}
	var snaps []rbd.SnapInfo
	for _, s := range info.Snapshots {
		if s.Namespace == rbd.SnapNamespaceUser {
			snaps = append(snaps, s)
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].ID < snaps[j].ID })
	end := len(snaps)
	if snap != "" {
		end = -1
		for i, s := range snaps {
			if s.Name == snap {
				end = i
				last = copyStage{snap: s.Name, size: s.Size}
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("%w: snapshot %q", rbd.ErrNotFound, snap)
		}
	}
	var stages []copyStage
	if deep {
		for _, s := range snaps[:end] {
			stages = append(stages, copyStage{snap: s.Name, size: s.Size, take: true, protected: s.Protected})
		}
		if snap != "" {
			// deep copy of a snapshot takes the snapshot itself too
			last.take, last.protected = true, snaps[end].Protected
		}
	}
	return append(stages, last), nil
}

// copyInto copies the stages of the source into out: its metadata, then
// each stage's data (with deep, what changed since the stage before),
// taking the stage's snapshot on out where asked.
func copyInto(ctx context.Context, conn *rados.Conn, src imageSpec, head, out *rbd.Image, meta map[string]string,
	stages []copyStage, sparse int64, pr *progress) error {
	for k, v := range meta {
		if err := out.MetadataSet(ctx, k, v); err != nil {
			return err
		}
	}
	var total, done int64
	for _, s := range stages {
		total += s.size
	}
	ioc, err := conn.IOContext(ctx, src.pool, src.ns)
	if err != nil {
		return err
	}
	prev := ""
	for i, s := range stages {
		img := head
		if s.snap != "" {
			if img, err = rbd.Open(ctx, ioc, src.name, rbd.OpenOptions{ReadOnly: true, Snapshot: s.snap}); err != nil {
				return err
			}
		}
		if out.Size() != s.size {
			if err := out.Resize(ctx, s.size); err != nil {
				return err
			}
		}
		progress := func(n int64) { pr.update(uint64(done+n), uint64(total)) }
		if i == 0 {
			err = copySparse(ctx, img, out, s.size, sparse, progress)
		} else {
			err = copyChanges(ctx, img, out, prev, s.size, progress)
		}
		if img != head {
			if cerr := img.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return err
		}
		done += s.size
		if s.take {
			if err := out.Flush(ctx); err != nil {
				return err
			}
			if err := out.CreateSnapshot(ctx, s.snap); err != nil {
				return err
			}
			if s.protected {
				if err := out.ProtectSnapshot(ctx, s.snap); err != nil {
					return err
				}
			}
		}
		prev = s.snap
	}
	return out.Flush(ctx)
}

// copySparse copies [0,size) of in to out, several chunks in flight,
// writing each run of blocks of sparse bytes that are not all zeros.
func copySparse(ctx context.Context, in, out *rbd.Image, size, sparse int64, progress func(int64)) error {
	return forChunks(ctx, size, progress, func(ctx context.Context, off, n int64) error {
		buf := make([]byte, n)
		if _, err := in.ReadAtContext(ctx, buf, off); err != nil {
			return err
		}
		zero := make([]byte, sparse)
		for start := int64(0); start < n; {
			// blocks are aligned to the image, as librbd's
			end := min(n, (off+start)/sparse*sparse+sparse-off)
			if bytes.Equal(buf[start:end], zero[:end-start]) {
				start = end
				continue
			}
			run := end
			for run < n {
				next := min(n, run+sparse)
				if bytes.Equal(buf[run:next], zero[:next-run]) {
					break
				}
				run = next
			}
			if _, err := out.WriteAtContext(ctx, buf[start:run], off+start); err != nil {
				return err
			}
			start = run
		}
		return nil
	})
}

// copyChanges writes into out what changed in in since snapshot from:
// the data of the extents written, and discards where data went away.
func copyChanges(ctx context.Context, in, out *rbd.Image, from string, size int64, progress func(int64)) error {
	return forChunks(ctx, size, progress, func(ctx context.Context, off, n int64) error {
		return in.Diff(ctx, off, n, rbd.DiffOptions{FromSnap: from}, func(eoff, elen int64, exists bool) error {
			if !exists {
				return out.Discard(ctx, eoff, elen)
			}
			buf := make([]byte, elen)
			if _, err := in.ReadAtContext(ctx, buf, eoff); err != nil {
				return err
			}
			_, err := out.WriteAtContext(ctx, buf, eoff)
			return err
		})
	})
}

// forChunks runs f on the ioChunk-sized pieces of [0,size), a few at a
// time, reporting progress in order of completion.
func forChunks(parent context.Context, size int64, progress func(int64), f func(ctx context.Context, off, n int64) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		done  int64
		sem   = make(chan struct{}, 8)
	)
	for off := int64(0); off < size; off += ioChunk {
		n := min(ioChunk, size-off)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := f(ctx, off, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
				cancel()
			}
			done += n
			progress(done)
		}()
	}
	wg.Wait()
	if first == nil {
		first = parent.Err()
	}
	return first
}

func (c *rbdCommand) sparsifyCommand() *cli.Command {
	var (
		noProgress bool
		sparse     int64 = copySparseSize
	)
	cmd := &cli.Command{
		Name: "sparsify", Summary: "deallocate the zeroed blocks of an image", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			sp, err := c.parseSpec(inv.Args[0], false)
			if err != nil {
				return err
			}
			if sp.snap != "" {
				return cli.Usagef(cli.BadArgument, "snapshot name specified for a command that doesn't use it")
			}
			pr := newProgress(c.stderr, "Image sparsify", noProgress)
			err = c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
				return img.Sparsify(ctx, uint64(sparse), pr.update)
			})
			pr.finish(err)
			if err != nil {
				return rbdFailure(c.stderr, "sparsify", err)
			}
			return nil
		},
	}
	// the size is checked where librbd checks it (EINVAL, exit 22)
	cmd.Func("--sparse-size SIZE", "deallocate zeroed blocks of this size, a power of two of at least 4K (default 4K)", func(v []string) error {
		n, err := cli.ParseSize(v[0], 1)
		sparse = n
		return err
	})
	noProgressOption(cmd, &noProgress)
	return cmd
}
