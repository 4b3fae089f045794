package kernel

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// moduleInitCompressedFile is MODULE_INIT_COMPRESSED_FILE: finit_module(2)
// decompresses the file in the kernel (Linux 5.17+ built with
// CONFIG_MODULE_DECOMPRESS, for the compression it was configured with).
const moduleInitCompressedFile = 4

// maxModuleSize bounds a module file, compressed or not: the largest
// modules of Debian's kernels are a few MiB.
const maxModuleSize = 64 << 20

// Compression of a module file, told by its name as modules.dep lists it.
const (
	compressionNone = ""
	compressionGzip = "gzip"
	compressionXZ   = "xz"
	compressionZstd = "zstd"
)

func moduleCompression(path string) string {
	switch {
	case strings.HasSuffix(path, ".ko.gz"):
		return compressionGzip
	case strings.HasSuffix(path, ".ko.xz"):
		return compressionXZ
	case strings.HasSuffix(path, ".ko.zst"):
		return compressionZstd
	}
	return compressionNone
}

// How a module file went into the kernel, as LoadModule logs it.
const (
	loadedFinit            = "finit_module"
	loadedInit             = "init_module"
	loadedKernelDecompress = "finit_module, decompressed by the kernel"
	loadedGoDecompress     = "init_module, decompressed in the caller"
)

// moduleSyscalls are the two system calls that load a module: the real
// ones, or a test's fakes.
type moduleSyscalls struct {
	finitModule func(fd int, params string, flags int) error
	initModule  func(image []byte, params string) error
}

func systemModuleSyscalls() moduleSyscalls {
	return moduleSyscalls{finitModule: unix.FinitModule, initModule: unix.InitModule}
}

// InitModuleFile loads one module file into the kernel, the way
// github.com/pmorjan/kmod's InitFunc is called (kmod.SetInitFunc):
// an uncompressed .ko with finit_module(2) (init_module(2) where that is
// missing); a .ko.xz, .ko.zst or .ko.gz first with finit_module and
// MODULE_INIT_COMPRESSED_FILE, and where the kernel refuses that
// (older than 5.17, built without CONFIG_MODULE_DECOMPRESS, or for
// another compression) decompressed here and handed to init_module.
// LoadModule uses it unless ModuleConfig.InitFunc says otherwise.
func InitModuleFile(path, params string, flags int) error {
	_, err := systemModuleSyscalls().load(path, params, flags)
	return err
}

// load loads the module file at path and says how it did.
func (s moduleSyscalls) load(path, params string, flags int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	comp := moduleCompression(path)
	if comp == compressionNone {
		err := s.finitModule(int(f.Fd()), params, flags)
		if !errors.Is(err, unix.ENOSYS) {
			if err != nil {
				return "", fmt.Errorf("module %s: finit_module: %w", path, err)
			}
			return loadedFinit, nil
		}
		if flags != 0 {
			return "", fmt.Errorf("module %s: no finit_module, and init_module takes no flags (%#x)", path, flags)
		}
		image, err := readModule(f, path)
		if err != nil {
			return "", err
		}
		if err := s.initModule(image, params); err != nil {
			return "", fmt.Errorf("module %s: init_module: %w", path, err)
		}
		return loadedInit, nil
	}

	err = s.finitModule(int(f.Fd()), params, flags|moduleInitCompressedFile)
	if err == nil {
		return loadedKernelDecompress, nil
	}
	if !kernelRefusedCompressed(err) {
		return "", fmt.Errorf("module %s: finit_module (compressed file): %w", path, err)
	}
	if flags != 0 {
		return "", fmt.Errorf("module %s: the kernel cannot decompress it (%v), and init_module takes no flags (%#x)", path, err, flags)
	}
	compressed, rerr := readModule(f, path)
	if rerr != nil {
		return "", rerr
	}
	image, derr := decompressModule(compressed, comp, maxModuleSize)
	if derr != nil {
		return "", &ModuleDecompressError{Path: path, Compression: comp, Err: derr}
	}
	if err := s.initModule(image, params); err != nil {
		return "", fmt.Errorf("module %s: init_module (decompressed %s, %d bytes): %w", path, comp, len(image), err)
	}
	return loadedGoDecompress, nil
}

// kernelRefusedCompressed tells whether finit_module's error with
// MODULE_INIT_COMPRESSED_FILE means the kernel cannot take the file
// compressed (so decompressing it here may work) rather than refusing the
// module itself: EINVAL for a flag it does not know (before 5.17) or a
// compression it was not built for, EOPNOTSUPP without
// CONFIG_MODULE_DECOMPRESS, ENOSYS without finit_module at all.
func kernelRefusedCompressed(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS)
}

// readModule reads a module file whole, refusing one beyond
// maxModuleSize.
func readModule(f *os.File, path string) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxModuleSize+1))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	if len(b) > maxModuleSize {
		return nil, fmt.Errorf("module %s: %w", path, ErrModuleTooLarge)
	}
	return b, nil
}
