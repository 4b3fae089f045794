package luks

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/purerbd/purerbd/internal/bufpool"
	"github.com/purerbd/purerbd/rbd"
)

// Device is the raw image under the encryption: the methods of
// *rbd.Image that an encrypted view needs, as an interface so that tests
// and wrappers (the CSI node's image) can stand in for it. A Device that
// also reports allocation (AllocatedExtents) or size changes (NotifySize)
// as *rbd.Image does has them passed through, shifted to plaintext
// offsets.
type Device interface {
	ReaderAt
	WriteAtContext(ctx context.Context, p []byte, off int64) (int, error)
	Size() int64
	ReadOnly() bool
	Flush(ctx context.Context) error
}

// allocationReporter and sizeNotifier are the optional abilities of a
// Device.
type allocationReporter interface {
	AllocatedExtents(ctx context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error
}

type sizeNotifier interface {
	NotifySize(fn func(size int64)) (cancel func())
}

// Image is the plaintext view of an encrypted image, as librbd presents
// it after rbd_encryption_load: offset 0 is the first byte of the data
// area, Size is the image's size less the data offset, and every read and
// write is decrypted or encrypted on the way. Its method set is the one
// package nbd/rbdnbd serves (reads, writes, flush, discard, write zeroes,
// block status, size changes).
//
// Reads of holes return zeroes without decrypting: a sector whose
// ciphertext reads as all zeroes is taken to be a hole, since encryption
// never produces one. librbd also returns zeroes for objects that do not
// exist and for the holes its sparse reads report, but decrypts the
// zeroes a plain read returns for never-written bytes of an object that
// exists into noise; those bytes were never written by anyone, and here
// they read as zeroes. Everything written reads the same through both.
//
// Writes that do not cover whole sectors read, merge and rewrite the
// sectors at their ends.
type Image struct {
	dev    Device
	hdr    *Header
	cipher *sectorCipher
	// edges serialize the read-merge-write of partial sectors: two
	// writes to different bytes of one sector must not both rewrite it
	// from the same old contents.
	edges [64]sync.Mutex
	zeros sync.Pool
	// bufs holds the ciphertext of writes while they are written (a
	// buffer the size of each write, which the device does not keep),
	// and the whole sectors of reads that begin or end inside one.
	bufs bufpool.Pool
	// objectSize is the raw image's object size when whole objects can
	// be discarded for zeroes (see Discard); 0 when they cannot.
	objectSize int64
}

// Open reads and unlocks the LUKS header at the start of dev. version is
// 1 or 2 to require that version (rbd's luks1 and luks2), or 0 for either
// (rbd's luks). A wrong passphrase is ErrWrongPassphrase; bytes that are
// not a LUKS header (of the required version), ErrNotLUKS. The header
// of a clone formatted with a key of its own is ErrUnsupported here:
// OpenLayers opens it with its ancestors' encryption.
func Open(ctx context.Context, dev Device, passphrase []byte, version int) (*Image, error) {
	h, err := ReadHeader(ctx, dev)
	if err != nil {
		return nil, err
	}
	if h.Clone {
		return nil, fmt.Errorf("%w: the header of an encrypted clone, which needs its parent's encryption too (OpenLayers)", ErrUnsupported)
	}
	if err := h.fits(version, dev.Size()); err != nil {
		return nil, err
	}
	key, err := h.Unlock(ctx, dev, passphrase)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	return openWithKey(ctx, dev, h, key)
}

// fits checks that h is of version (0: either) and that its data area
// starts within an image of size bytes.
func (h *Header) fits(version int, size int64) error {
	if version != 0 && h.Version != version {
		return fmt.Errorf("%w: the image is LUKS%d, not LUKS%d", ErrNotLUKS, h.Version, version)
	}
	if h.DataOffset > size {
		return fmt.Errorf("%w: data offset %d past the image's end at %d", ErrCorrupt, h.DataOffset, size)
	}
	return nil
}

// openWithKey makes the view of dev whose header h key unlocked.
func openWithKey(ctx context.Context, dev Device, h *Header, key []byte) (*Image, error) {
	img, err := newImage(dev, h, key)
	if err != nil {
		return nil, err
	}
	if err := img.setObjectSize(ctx); err != nil {
		return nil, err
	}
	return img, nil
}

// setObjectSize sets objectSize for an RBD image whose whole objects
// Discard may remove.
func (img *Image) setObjectSize(ctx context.Context) error {
	r, ok := img.dev.(rbdImage)
	if !ok {
		return nil
	}
	st, err := r.Stat(ctx)
	if err != nil {
		return fmt.Errorf("luks: %w", err)
	}
	// Whole objects of the data area map to whole plaintext ranges
	// only without fancy striping, and the data offset must be a
	// whole number of them (librbd aligns it so).
	if (st.StripeCount <= 1 || st.StripeUnit == st.ObjectSize) && st.ObjectSize > 0 &&
		img.hdr.DataOffset%int64(st.ObjectSize) == 0 {
		img.objectSize = int64(st.ObjectSize)
	}
	return nil
}

// rbdImage is what an RBD image (*rbd.Image) offers beyond a Device that
// lets Discard remove whole objects instead of writing them.
type rbdImage interface {
	discarder
	Stat(ctx context.Context) (rbd.Info, error)
	Parent() (*rbd.ParentSpec, int64)
}

func newImage(dev Device, h *Header, key []byte) (*Image, error) {
	c, err := newSectorCipher(key, h.SectorSize, h.IVTweak)
	if err != nil {
		return nil, err
	}
	img := &Image{dev: dev, hdr: h, cipher: c}
	img.zeros.New = func() any { return new([zeroChunk]byte) }
	return img, nil
}

// ReadHeader reads and parses the LUKS header at the start of dev.
func ReadHeader(ctx context.Context, dev Device) (*Header, error) {
	b, err := readHeaderBytes(ctx, dev, 0)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// readHeaderBytes reads the header at the start of dev: its HeaderLen
// bytes and extra more, as far as dev reaches. A header longer than dev
// is corrupt.
func readHeaderBytes(ctx context.Context, dev Device, extra int) ([]byte, error) {
	first := make([]byte, min(MinHeaderRead, dev.Size()))
	if err := readFull(ctx, dev, first, 0); err != nil {
		return nil, fmt.Errorf("luks: reading the header: %w", err)
	}
	n, err := HeaderLen(first)
	if err != nil {
		return nil, err
	}
	if int64(n) > dev.Size() {
		return nil, fmt.Errorf("%w: header of %d bytes on an image of %d", ErrCorrupt, n, dev.Size())
	}
	need := min(int64(n+extra), dev.Size())
	if need <= int64(len(first)) {
		return first, nil
	}
	b := make([]byte, need)
	if err := readFull(ctx, dev, b, 0); err != nil {
		return nil, fmt.Errorf("luks: reading the header: %w", err)
	}
	return b, nil
}

// Header returns the image's LUKS header.
func (img *Image) Header() *Header { return img.hdr }

// Size is the plaintext size: the image's size less the data offset.
func (img *Image) Size() int64 { return max(img.dev.Size()-img.hdr.DataOffset, 0) }

// ReadOnly is the underlying image's.
func (img *Image) ReadOnly() bool { return img.dev.ReadOnly() }

// Flush flushes the underlying image.
func (img *Image) Flush(ctx context.Context) error { return img.dev.Flush(ctx) }

// ReadAtContext reads plaintext at off, following io.ReaderAt: a read
// past the end returns what there is and io.EOF.
func (img *Image) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("luks: read at negative offset %d", off)
	}
	size := img.Size()
	if len(p) == 0 {
		return 0, nil
	}
	if off >= size {
		return 0, io.EOF
	}
	var eof error
	if off+int64(len(p)) > size {
		p, eof = p[:size-off], io.EOF
	}
	ss := int64(img.hdr.SectorSize)
	start, end := off/ss*ss, roundUp(off+int64(len(p)), ss)
	if start == off && end == off+int64(len(p)) {
		if err := img.readSectors(ctx, p, start); err != nil {
			return 0, err
		}
		return len(p), eof
	}
	// a read of part of a sector decrypts the whole sector in a pooled
	// buffer, as a write's edges are
	bp := img.bufs.Get(int(end - start))
	defer img.bufs.Put(bp)
	if err := img.readSectors(ctx, *bp, start); err != nil {
		return 0, err
	}
	copy(p, (*bp)[off-start:])
	return len(p), eof
}

// readSectors reads and decrypts whole sectors at plaintext offset off.
func (img *Image) readSectors(ctx context.Context, buf []byte, off int64) error {
	if err := readFull(ctx, img.dev, buf, img.hdr.DataOffset+off); err != nil {
		return err
	}
	ss := img.hdr.SectorSize
	for i := 0; i < len(buf); i += ss {
		s := buf[i : i+ss]
		if allZero(s) {
			continue // a hole reads as zeroes
		}
		img.cipher.decrypt(s, s, off+int64(i))
	}
	return nil
}

// WriteAtContext encrypts and writes p at plaintext offset off; p is not
// changed. A write past the end fails.
func (img *Image) WriteAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > img.Size() {
		return 0, fmt.Errorf("luks: write of %d bytes at %d outside the image's %d", len(p), off, img.Size())
	}
	if len(p) == 0 {
		return 0, nil
	}
	ss := int64(img.hdr.SectorSize)
	start, end := off/ss*ss, roundUp(off+int64(len(p)), ss)
	bp := img.bufs.Get(int(end - start))
	defer img.bufs.Put(bp)
	buf := *bp // not zeroed: the edges and p cover it whole
	head, tail := start != off, end != off+int64(len(p))
	if head || tail {
		unlock := img.lockEdges(start/ss, end/ss-1, head, tail)
		defer unlock()
		if head {
			if err := img.readSectors(ctx, buf[:ss], start); err != nil {
				return 0, err
			}
		}
		if tail && (!head || end-start > ss) {
			if err := img.readSectors(ctx, buf[len(buf)-int(ss):], end-ss); err != nil {
				return 0, err
			}
		}
	}
	if head || tail {
		copy(buf[off-start:], p)
		img.cipher.encrypt(buf, buf, start)
	} else {
		img.cipher.encrypt(buf, p, start)
	}
	if _, err := img.dev.WriteAtContext(ctx, buf, img.hdr.DataOffset+start); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lockEdges locks the mutexes of the partial sectors first and last.
func (img *Image) lockEdges(first, last int64, head, tail bool) (unlock func()) {
	var idx []int
	n := int64(len(img.edges))
	if head {
		idx = append(idx, int(first%n))
	}
	if tail && (!head || last%n != first%n) {
		idx = append(idx, int(last%n))
	}
	if len(idx) == 2 && idx[0] > idx[1] {
		idx[0], idx[1] = idx[1], idx[0]
	}
	for _, i := range idx {
		img.edges[i].Lock()
	}
	return func() {
		for _, i := range idx {
			img.edges[i].Unlock()
		}
	}
}

// AllocatedExtents reports the underlying image's allocation of the
// data area at plaintext offsets; holes read as zeroes. A Device that
// cannot tell has the whole range reported allocated.
func (img *Image) AllocatedExtents(ctx context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error {
	d := img.hdr.DataOffset
	length = min(length, img.Size()-off)
	a, ok := img.dev.(allocationReporter)
	if !ok {
		return fn(off, length, true)
	}
	return a.AllocatedExtents(ctx, off+d, length, func(o, n int64, allocated bool) error {
		return fn(o-d, n, allocated)
	})
}

// NotifySize calls fn with the plaintext size when the image's size
// changes (never, for a Device that does not report it).
func (img *Image) NotifySize(fn func(size int64)) (cancel func()) {
	n, ok := img.dev.(sizeNotifier)
	if !ok {
		return func() {}
	}
	d := img.hdr.DataOffset
	return n.NotifySize(func(size int64) { fn(max(size-d, 0)) })
}

func readFull(ctx context.Context, r ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAtContext(ctx, p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
