package crc32c

import (
	"hash/crc32"
	"runtime"
	"sync"
	"time"
)

// hash/crc32 computes CRC-32C with the CPU's CRC32 instruction where
// there is one (SSE 4.2, ARMv8), many times faster than tables on
// hardware. Under an emulator the instruction may cost far more than
// the loads and xors of a table (qemu's TCG runs it in a helper, much
// slower than the tables it translates). So the first Update of a
// process times both on the same input and keeps hash/crc32 unless the
// tables are clearly faster.

// tablesFaster reports, once per process, whether the tables beat
// hash/crc32 here; it is the package's only state, set once and only
// read after.
var tablesFaster = sync.OnceValue(measureTablesFaster)

// Calibration: the input and the rounds each contender runs; each
// keeps its fastest round, so that a round the scheduler interrupted
// does not count.
const (
	calibrationLen    = 16 << 10
	calibrationRounds = 5
)

func measureTablesFaster() bool {
	p := make([]byte, calibrationLen)
	for i := range p {
		p[i] = byte(i * 131)
	}
	var acc uint32
	hw, tables := time.Duration(1<<62), time.Duration(1<<62)
	for range calibrationRounds {
		t0 := time.Now()
		acc ^= crc32.Update(acc, castagnoli, p)
		t1 := time.Now()
		acc ^= updateSlicing8(acc, p)
		t2 := time.Now()
		hw, tables = min(hw, t1.Sub(t0)), min(tables, t2.Sub(t1))
	}
	runtime.KeepAlive(acc)
	return clearlyFaster(tables, hw)
}

// clearlyFaster reports whether a took less than two thirds of b: only a
// clear margin turns away from the CPU's instruction, which hardware
// runs several times faster than tables.
func clearlyFaster(a, b time.Duration) bool { return a > 0 && a*3 < b*2 }
