//go:build !linux

package nbd

import "os"

func punchHole(*os.File, int64, int64) error        { return errNoFallocate }
func zeroRange(*os.File, int64, int64) error        { return errNoFallocate }
func dataSync(f *os.File) error                     { return f.Sync() }
func seekData(*os.File, int64) (int64, error)       { return 0, errNoSeekData }
func seekHole(f *os.File, off int64) (int64, error) { return 0, errNoSeekData }
