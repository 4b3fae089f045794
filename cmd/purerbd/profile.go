package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file to write a CPU profile of the whole command
// to (for `go tool pprof`), as the benchmarks' profiles are taken.
const cpuProfileEnv = "PURERBD_CPUPROFILE"

// startCPUProfile starts profiling when PURERBD_CPUPROFILE is set; stop
// writes the profile out.
func startCPUProfile(stderr io.Writer) (stop func()) {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "purerbd: %s: %v\n", cpuProfileEnv, err)
		if f != nil {
			_ = f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "purerbd: %s: %v\n", cpuProfileEnv, err)
		}
	}
}
