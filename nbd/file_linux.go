package nbd

import (
	"errors"
	"os"
	"syscall"
)

// fallocate modes (linux/falloc.h).
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
	fallocZeroRange = 0x10
)

// whence values of lseek (linux/fs.h).
const (
	seekWhenceData = 3
	seekWhenceHole = 4
)

func fallocate(f *os.File, mode uint32, off, length int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Fallocate(int(fd), mode, off, length)
			if ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errors.Is(ferr, syscall.EOPNOTSUPP) || errors.Is(ferr, syscall.ENOSYS) {
		return errNoFallocate
	}
	return ferr
}

func punchHole(f *os.File, off, length int64) error {
	return fallocate(f, fallocPunchHole|fallocKeepSize, off, length)
}

func zeroRange(f *os.File, off, length int64) error {
	return fallocate(f, fallocZeroRange|fallocKeepSize, off, length)
}

func dataSync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	return serr
}

func seek(f *os.File, off int64, whence int) (int64, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var pos int64
	var serr error
	if err := rc.Control(func(fd uintptr) { pos, serr = syscall.Seek(int(fd), off, whence) }); err != nil {
		return 0, err
	}
	if errors.Is(serr, syscall.EINVAL) {
		return 0, errNoSeekData
	}
	return pos, serr
}

func seekData(f *os.File, off int64) (int64, error) { return seek(f, off, seekWhenceData) }
func seekHole(f *os.File, off int64) (int64, error) { return seek(f, off, seekWhenceHole) }
