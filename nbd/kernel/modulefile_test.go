package kernel

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	"github.com/ulikunitz/xz"
	"golang.org/x/sys/unix"
)

// fakeKernel stands in for finit_module and init_module: it records what
// it was handed and answers finit_module with finitErr (by flags).
type fakeKernel struct {
	finitErr   func(flags int) error
	finitFlags []int
	initImages [][]byte
}

func (k *fakeKernel) syscalls() moduleSyscalls {
	return moduleSyscalls{
		finitModule: func(fd int, params string, flags int) error {
			k.finitFlags = append(k.finitFlags, flags)
			if k.finitErr == nil {
				return nil
			}
			return k.finitErr(flags)
		},
		initModule: func(image []byte, params string) error {
			k.initImages = append(k.initImages, bytes.Clone(image))
			return nil
		},
	}
}

// moduleImage is what the fake module files hold once decompressed: an
// ELF header and a body that compresses.
func moduleImage() []byte {
	b := []byte("\x7fELF\x02\x01\x01")
	for i := 0; i < 4096; i++ {
		b = append(b, byte(i%251), byte(i%7))
	}
	return b
}

func compress(t testing.TB, comp string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch comp {
	case compressionGzip:
		w := gzip.NewWriter(&buf)
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case compressionXZ:
		// the kernel's own choice: CRC32 check, 1 MiB dictionary
		w, err := xz.WriterConfig{CheckSum: xz.CRC32, DictCap: 1 << 20}.NewWriter(&buf)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case compressionZstd:
		w, err := zstd.NewWriter(&buf)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	default:
		return data
	}
	return buf.Bytes()
}

func writeModule(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

var suffixes = map[string]string{
	compressionNone: ".ko", compressionGzip: ".ko.gz", compressionXZ: ".ko.xz", compressionZstd: ".ko.zst",
}

func TestModuleUncompressed(t *testing.T) {
	img := moduleImage()
	p := writeModule(t, "nbd.ko", img)

	k := &fakeKernel{}
	how, err := k.syscalls().load(p, "nbds_max=4", 0)
	require.NoError(t, err)
	require.Equal(t, loadedFinit, how)
	require.Equal(t, []int{0}, k.finitFlags, "an uncompressed module never asks the kernel to decompress")
	require.Empty(t, k.initImages)

	// no finit_module: the file's bytes go to init_module
	k = &fakeKernel{finitErr: func(int) error { return unix.ENOSYS }}
	how, err = k.syscalls().load(p, "", 0)
	require.NoError(t, err)
	require.Equal(t, loadedInit, how)
	require.Equal(t, [][]byte{img}, k.initImages)

	// any other refusal is the module's, not the way it was loaded
	k = &fakeKernel{finitErr: func(int) error { return unix.EEXIST }}
	_, err = k.syscalls().load(p, "", 0)
	require.ErrorIs(t, err, unix.EEXIST)
	require.Empty(t, k.initImages)
}

func TestModuleCompressedKernelDecompresses(t *testing.T) {
	for _, comp := range []string{compressionGzip, compressionXZ, compressionZstd} {
		t.Run(comp, func(t *testing.T) {
			p := writeModule(t, "nbd"+suffixes[comp], compress(t, comp, moduleImage()))
			k := &fakeKernel{}
			how, err := k.syscalls().load(p, "", 0)
			require.NoError(t, err)
			require.Equal(t, loadedKernelDecompress, how)
			require.Equal(t, []int{moduleInitCompressedFile}, k.finitFlags)
			require.Empty(t, k.initImages)
		})
	}
}

func TestModuleCompressedFallback(t *testing.T) {
	img := moduleImage()
	// what each kind of kernel answers MODULE_INIT_COMPRESSED_FILE with
	refusals := map[string]error{
		"unknown flag (before 5.17) or other compression": unix.EINVAL,
		"no CONFIG_MODULE_DECOMPRESS":                     unix.EOPNOTSUPP,
		"no finit_module":                                 unix.ENOSYS,
	}
	for _, comp := range []string{compressionGzip, compressionXZ, compressionZstd} {
		for why, refusal := range refusals {
			t.Run(comp+"/"+why, func(t *testing.T) {
				p := writeModule(t, "nbd"+suffixes[comp], compress(t, comp, img))
				k := &fakeKernel{finitErr: func(flags int) error {
					if flags&moduleInitCompressedFile != 0 {
						return refusal
					}
					return nil
				}}
				how, err := k.syscalls().load(p, "", 0)
				require.NoError(t, err)
				require.Equal(t, loadedGoDecompress, how)
				require.Equal(t, []int{moduleInitCompressedFile}, k.finitFlags)
				require.Equal(t, [][]byte{img}, k.initImages)
			})
		}
	}
}

func TestModuleCompressedRefused(t *testing.T) {
	p := writeModule(t, "nbd.ko.xz", compress(t, compressionXZ, moduleImage()))
	// the kernel took the flag and refused the module itself: that stands
	for _, refusal := range []error{unix.EPERM, unix.ENOEXEC, unix.EEXIST, unix.EKEYREJECTED} {
		k := &fakeKernel{finitErr: func(int) error { return refusal }}
		_, err := k.syscalls().load(p, "", 0)
		require.ErrorIs(t, err, refusal)
		require.Empty(t, k.initImages, "%v", refusal)
	}
	// module flags cannot travel with init_module
	k := &fakeKernel{finitErr: func(int) error { return unix.EOPNOTSUPP }}
	_, err := k.syscalls().load(p, "", unix.MODULE_INIT_IGNORE_VERMAGIC)
	require.Error(t, err)
	require.Empty(t, k.initImages)
}

func TestModuleDecompressErrors(t *testing.T) {
	refuse := &fakeKernel{finitErr: func(int) error { return unix.EOPNOTSUPP }}
	img := moduleImage()

	// a corrupt file: typed error, nothing handed to the kernel
	for _, comp := range []string{compressionGzip, compressionXZ, compressionZstd} {
		b := compress(t, comp, img)
		b[len(b)/2] ^= 0xff
		b[len(b)/2+1] ^= 0x55
		p := writeModule(t, "nbd"+suffixes[comp], b)
		_, err := refuse.syscalls().load(p, "", 0)
		var de *ModuleDecompressError
		require.ErrorAs(t, err, &de, comp)
		require.Equal(t, comp, de.Compression)
	}
	require.Empty(t, refuse.initImages)

	// what decompresses beyond the limit (64 MiB for a real load) is no
	// module; one byte less than the image is refused, the image's size is
	// not
	for _, comp := range []string{compressionGzip, compressionXZ, compressionZstd} {
		b := compress(t, comp, img)
		_, err := decompressModule(b, comp, int64(len(img)-1))
		require.ErrorIs(t, err, ErrModuleTooLarge, comp)
		out, err := decompressModule(b, comp, int64(len(img)))
		require.NoError(t, err, comp)
		require.Equal(t, img, out, comp)
	}
}

// xzWithDict returns a small xz file whose block header asks for the
// dictionary size code (0..40) given.
func xzWithDict(t *testing.T, code byte) []byte {
	t.Helper()
	b := compress(t, compressionXZ, moduleImage())
	// stream header (12), block header: size, flags, [sizes], filter
	// id 0x21, props size 1, dictionary code
	h := b[xzHeaderSize:]
	i := bytes.Index(h[:(int(h[0])+1)*4], []byte{xzFilterLZMA2, 1})
	require.Positive(t, i)
	h[i+2] = code
	return b
}

func TestXZCheck(t *testing.T) {
	img := moduleImage()
	b := compress(t, compressionXZ, img)
	total, dict, err := xzCheck(b, maxModuleSize)
	require.NoError(t, err)
	require.Equal(t, int64(len(img)), total)
	require.Equal(t, int64(1<<20), dict)

	// stream padding after the stream is fine
	_, _, err = xzCheck(append(bytes.Clone(b), 0, 0, 0, 0), maxModuleSize)
	require.NoError(t, err)

	// a dictionary beyond 64 MiB is refused before any decoder sees it
	// (ulikunitz/xz would allocate it whole: 4 GiB for code 40)
	for _, code := range []byte{35, 40} {
		_, err := decompressModule(xzWithDict(t, code), compressionXZ, maxModuleSize)
		require.ErrorIs(t, err, ErrModuleTooLarge, "code %d", code)
	}
	_, _, err = xzCheck(xzWithDict(t, 41), maxModuleSize)
	require.ErrorIs(t, err, errXZLayout)

	// two streams: the decoder reads one, the check sees them all, so
	// it refuses the layout it cannot vouch for
	_, _, err = xzCheck(append(bytes.Clone(b), b...), maxModuleSize)
	require.ErrorIs(t, err, errXZLayout)

	// truncated anywhere
	for _, n := range []int{0, 6, 12, len(b) / 2, len(b) - 1} {
		_, _, err := xzCheck(b[:n], maxModuleSize)
		require.Error(t, err, "%d bytes", n)
	}
}

func TestModuleCompression(t *testing.T) {
	for path, want := range map[string]string{
		"kernel/drivers/block/nbd.ko":     compressionNone,
		"kernel/drivers/block/nbd.ko.xz":  compressionXZ,
		"kernel/drivers/block/nbd.ko.zst": compressionZstd,
		"kernel/drivers/block/nbd.ko.gz":  compressionGzip,
	} {
		require.Equal(t, want, moduleCompression(path), path)
	}
}

func TestInitModuleFileMissing(t *testing.T) {
	err := InitModuleFile(filepath.Join(t.TempDir(), "nbd.ko.xz"), "", 0)
	require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}
