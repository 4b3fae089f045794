package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file to write a CPU profile of the whole command
// to (for `go tool pprof`), as the benchmarks' profiles are taken; the
// --cpuprofile option does the same.
const cpuProfileEnv = "PURERBD_CPUPROFILE"

// startCPUProfile starts profiling into path, unless it is empty; stop
// writes the profile out. A failure is reported and the command runs
// without a profile.
func startCPUProfile(path string, stderr io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "purerbd: CPU profile: %v\n", err)
		if f != nil {
			_ = f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "purerbd: CPU profile: %v\n", err)
		}
	}
}
