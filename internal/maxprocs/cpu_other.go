//go:build !unix

package maxprocs

import "time"

// processCPU is unknown here: Run leaves GOMAXPROCS alone.
func processCPU() (time.Duration, bool) { return 0, false }
