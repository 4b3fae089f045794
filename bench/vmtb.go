package bench

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// vmTB is the testing.TB that package vmtest (written for tests) gets
// when the suite boots a VM outside `go test`: temporary directories
// under the suite's work directory, logs to the suite's logger, and
// Fatal turned into a panic that withVMTB recovers as an error. Only the
// methods vmtest calls are implemented; the embedded nil interface
// panics on any other.
type vmTB struct {
	testing.TB
	dir string
	log *slog.Logger
	n   int
}

// vmFatal is the panic value of vmTB.Fatalf.
type vmFatal struct{ msg string }

func (t *vmTB) Helper() {}

func (t *vmTB) TempDir() string {
	t.n++
	d := filepath.Join(t.dir, fmt.Sprintf("tmp%d", t.n))
	if err := os.MkdirAll(d, 0o755); err != nil {
		panic(vmFatal{err.Error()})
	}
	return d
}

func (t *vmTB) Logf(format string, args ...any) { t.log.Info("vm: " + fmt.Sprintf(format, args...)) }

func (t *vmTB) Fatalf(format string, args ...any) { panic(vmFatal{fmt.Sprintf(format, args...)}) }

func (t *vmTB) Fatal(args ...any) { panic(vmFatal{fmt.Sprint(args...)}) }

// withVMTB runs f with a vmTB rooted at dir and returns its Fatal as an
// error.
func withVMTB(dir string, log *slog.Logger, f func(tb testing.TB) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if v, ok := r.(vmFatal); ok {
				err = fmt.Errorf("%s", v.msg)
				return
			}
			// a testing.TB method vmTB lacks (the embedded nil): one
			// section lost, not the whole run
			log.Error("bench: VM harness panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("VM harness: %v", r)
		}
	}()
	return f(&vmTB{dir: dir, log: log})
}
