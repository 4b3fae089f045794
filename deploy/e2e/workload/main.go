// Command workload is the e2e cluster's test workload, /bin/workload in
// the workload image: it writes checksummed records to a file or block
// device and verifies them, so that a pod can prove its volume kept every
// acknowledged write across whatever the test does to the storage
// underneath (plugin restarts, node reboots, snapshots, clones).
//
//	workload write  --path P --count N --size S [--seed X] [--direct]
//	workload verify --path P --count N --size S [--seed X] [--direct]
//	workload stream --path P --size S --interval D [--log F] [--slots K] [--seed X] [--direct]
//	workload verify-stream --path P --size S [--last-index L] [--slots K] [--seed X] [--direct]
//
// Each prints JSON lines on stdout. write and verify deal with records
// 0..N-1 at offsets 0, S, 2S, ...; verify exits 1 naming the first bad
// record. stream writes one record at a time, each synced (fdatasync,
// after an O_DIRECT write with --direct) before the next, into a ring of
// K slots (default: the whole device, or 4096 for a file), until SIGTERM
// or SIGINT; it prints its stats every second and a final line
// {"writes","errors","max_stall_ms","last_index",...,"final":true}. A
// failed write is counted, reported and retried, never fatal.
// verify-stream exits 1 unless every record up to the last one is intact
// and, with --last-index (stream's last_index), none acknowledged is lost.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultSeed tells records of runs that give no --seed.
const defaultSeed = 1

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the exit code: 0 done and
// verified, 1 a check failed or the I/O could not be done, 2 bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: workload write|verify|stream|verify-stream --path P [flags] (workload CMD --help)")
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("workload "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("path", "", "file or block device")
	size := sizeFlag(4096)
	fs.Var(&size, "size", "record size in bytes (a multiple of 512; k, M suffixes)")
	seed := fs.Uint64("seed", defaultSeed, "run identifier carried in every record")
	direct := fs.Bool("direct", false, "O_DIRECT I/O (record size a multiple of 4096)")
	enc := json.NewEncoder(stdout)

	var err error
	failed := false
	switch cmd {
	case "write", "verify":
		count := fs.Int("count", 0, "number of records")
		if !parse(fs, args) {
			return 2
		}
		o := batchOptions{path: *path, count: *count, size: int(size), seed: *seed, direct: *direct}
		if err := o.check(); err != nil {
			fmt.Fprintf(stderr, "workload %s: %v\n", cmd, err)
			return 2
		}
		var s batchSummary
		if cmd == "write" {
			s, err = writeRecords(o)
		} else {
			s, err = verifyRecords(o)
		}
		if err == nil {
			failed = !s.OK
			if failed {
				fmt.Fprintf(stderr, "workload verify: %d of %d records bad, first: %s\n", s.Bad, s.Count, s.FirstError)
			}
			err = enc.Encode(s)
		}
	case "stream":
		o := streamOptions{progress: time.Second}
		fs.IntVar(&o.slots, "slots", 0, "ring size in records (default: the whole device, or 4096 for a file)")
		fs.DurationVar(&o.interval, "interval", 10*time.Millisecond, "pause between writes")
		fs.StringVar(&o.logPath, "log", "", "file to record every write's latency in (JSON lines)")
		fs.DurationVar(&o.stopWait, "stop-wait", 10*time.Second, "how long a stop waits for a write in flight")
		if !parse(fs, args) {
			return 2
		}
		o.path, o.size, o.seed, o.direct = *path, int(size), *seed, *direct
		if err := o.check(); err != nil {
			fmt.Fprintf(stderr, "workload stream: %v\n", err)
			return 2
		}
		_, err = stream(ctx, o, stdout)
	case "verify-stream":
		o := verifyStreamOptions{}
		fs.IntVar(&o.slots, "slots", 0, "ring size stream used (default: as its first record says)")
		fs.Int64Var(&o.lastIndex, "last-index", -1, "last_index stream reported: no record up to it may be lost")
		if !parse(fs, args) {
			return 2
		}
		fs.Visit(func(f *flag.Flag) { o.lastKnown = o.lastKnown || f.Name == "last-index" })
		o.path, o.size, o.seed, o.direct = *path, int(size), *seed, *direct
		if err := o.check(); err != nil {
			fmt.Fprintf(stderr, "workload verify-stream: %v\n", err)
			return 2
		}
		var s verifyStreamSummary
		s, err = verifyStream(o)
		if err == nil {
			failed = !s.OK
			if failed {
				fmt.Fprintf(stderr, "workload verify-stream: %d faults in a ring of %d slots, first: %s\n", s.Bad, s.Slots, s.FirstError)
			}
			err = enc.Encode(s)
		}
	default:
		fmt.Fprintf(stderr, "workload: unknown command %q (write, verify, stream, verify-stream)\n", cmd)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "workload %s: %v\n", cmd, err)
		return 1
	}
	if failed {
		return 1
	}
	return 0
}

// parse parses the subcommand's flags; false means usage was printed.
func parse(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return false
	}
	return true
}

// sizeFlag is a byte count with an optional k, M or G (binary) suffix.
type sizeFlag int

func (s *sizeFlag) String() string { return strconv.Itoa(int(*s)) }

func (s *sizeFlag) Set(v string) error {
	mult := 1
	switch {
	case strings.HasSuffix(v, "k"), strings.HasSuffix(v, "K"):
		mult = 1 << 10
	case strings.HasSuffix(v, "M"):
		mult = 1 << 20
	case strings.HasSuffix(v, "G"):
		mult = 1 << 30
	}
	if mult != 1 {
		v = v[:len(v)-1]
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return errors.New("want a positive byte count such as 4096 or 4k")
	}
	*s = sizeFlag(n * mult)
	return nil
}
