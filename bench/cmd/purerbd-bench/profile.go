package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// profiles writes a CPU profile and an allocation profile of the
// measured part of a worker, when asked for.
type profiles struct {
	cpu, allocs string
	cpuFile     *os.File
}

// start begins CPU profiling.
func (p *profiles) start() error {
	if p.allocs != "" {
		// every allocation sampled at 1 per 64 KiB (Go's default 512 KiB
		// misses the small ones a request path makes)
		runtime.MemProfileRate = 64 << 10
	}
	if p.cpu == "" {
		return nil
	}
	f, err := os.Create(p.cpu)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	p.cpuFile = f
	return nil
}

// stop ends CPU profiling and writes the allocation profile.
func (p *profiles) stop() error {
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		if err := p.cpuFile.Close(); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		p.cpuFile = nil
	}
	if p.allocs == "" {
		return nil
	}
	f, err := os.Create(p.allocs)
	if err != nil {
		return fmt.Errorf("allocs profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("allocs profile: %w", err)
	}
	return f.Close()
}
