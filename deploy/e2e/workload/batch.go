package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// batchOptions are the flags of write and verify: count records of size
// bytes of run seed, at offsets 0, size, 2*size, ...
type batchOptions struct {
	path   string
	count  int
	size   int
	seed   uint64
	direct bool
}

func (o batchOptions) check() error {
	if o.path == "" {
		return errors.New("--path is required")
	}
	if o.count <= 0 {
		return fmt.Errorf("--count %d: must be positive", o.count)
	}
	if err := checkSize(o.size); err != nil {
		return err
	}
	return checkDirect(o.size, o.direct)
}

// batchSummary is the JSON line write and verify print.
type batchSummary struct {
	Op        string  `json:"op"`
	Path      string  `json:"path"`
	Count     int     `json:"count"`
	Size      int     `json:"size"`
	Seed      uint64  `json:"seed"`
	Bytes     int64   `json:"bytes"`
	ElapsedMS float64 `json:"elapsed_ms"`
	OK        bool    `json:"ok"`
	// verify only: how many records are wrong, the first of them and
	// what is wrong with it
	Bad        int    `json:"bad,omitempty"`
	FirstBad   *int   `json:"first_bad,omitempty"`
	FirstError string `json:"first_error,omitempty"`
}

// writeRecords writes records 0..count-1 and makes them durable.
func writeRecords(o batchOptions) (batchSummary, error) {
	s := batchSummary{Op: "write", Path: o.path, Count: o.count, Size: o.size, Seed: o.seed}
	f, err := openTarget(o.path, true, o.direct)
	if err != nil {
		return s, err
	}
	defer f.Close()
	total := int64(o.count) * int64(o.size)
	if c, err := capacity(f); err != nil {
		return s, err
	} else if c >= 0 && total > c {
		return s, fmt.Errorf("%d records of %d bytes need %d bytes, %s holds %d", o.count, o.size, total, o.path, c)
	}
	start := time.Now()
	buf := alignedBuf(o.size)
	for i := range o.count {
		encodeRecord(buf, recordID{index: uint64(i), seed: o.seed})
		if _, err := f.WriteAt(buf, int64(i)*int64(o.size)); err != nil {
			return s, fmt.Errorf("write record %d: %w", i, err)
		}
		s.Bytes += int64(o.size)
	}
	if err := datasync(f); err != nil {
		return s, err
	}
	s.ElapsedMS = ms(time.Since(start))
	s.OK = true
	return s, nil
}

// verifyRecords reads records 0..count-1 back and checks each; the
// summary counts the wrong ones and names the first. The error is for
// what stopped the check itself (the target cannot be opened).
func verifyRecords(o batchOptions) (batchSummary, error) {
	s := batchSummary{Op: "verify", Path: o.path, Count: o.count, Size: o.size, Seed: o.seed}
	f, err := openTarget(o.path, false, o.direct)
	if err != nil {
		return s, err
	}
	defer f.Close()
	start := time.Now()
	buf := alignedBuf(o.size)
	for i := range o.count {
		err := readRecord(f, buf, int64(i)*int64(o.size))
		if err == nil {
			s.Bytes += int64(o.size)
			err = checkRecord(buf, recordID{index: uint64(i), seed: o.seed})
		}
		if err != nil {
			s.Bad++
			if s.FirstBad == nil {
				s.FirstBad = &i
				s.FirstError = fmt.Sprintf("record %d: %v", i, err)
			}
		}
	}
	s.ElapsedMS = ms(time.Since(start))
	s.OK = s.Bad == 0
	return s, nil
}

// readRecord reads one record at off into buf; a record cut short by the
// end of the file is an error.
func readRecord(f *os.File, buf []byte, off int64) error {
	n, err := f.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == io.EOF {
		return fmt.Errorf("%w (end of %s at %d)", errMissing, f.Name(), off+int64(n))
	}
	return fmt.Errorf("read at %d: %w", off, err)
}

// ms is d in milliseconds, as the summaries report durations.
func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
