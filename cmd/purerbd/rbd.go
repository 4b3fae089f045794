package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rbd"
)

// `purerbd rbd`: RBD image administration with the `rbd` CLI's verbs,
// argument order and (for --format json) output keys where they overlap.

const rbdUsage = `usage: purerbd rbd [-c ceph.conf] [--id NAME] [-k keyring] [-m mons] [-p pool] <verb> ...
verbs:
  create --size SIZE [--object-size S|--order N] [--image-feature F,...]
         [--stripe-unit S --stripe-count N] [--data-pool P] IMAGE
  info [--format json] IMAGE[@SNAP]
  ls [-l] [--format json] [POOL[/NAMESPACE]]
  rm [--force] IMAGE
  rename SRC DST
  resize --size SIZE [--allow-shrink] IMAGE
  snap create|rm|protect|unprotect|rollback IMAGE@SNAP
  snap ls [--format json] IMAGE
  clone PARENT@SNAP CHILD
  flatten IMAGE
  image-meta get|set|remove|list IMAGE [KEY [VALUE]]
  import [--image-feature F,...] [--object-size S] PATH|- IMAGE
  export IMAGE[@SNAP] PATH|-
  status IMAGE
  lock ls IMAGE
  bench --io-type write|read|readwrite [--io-size S] [--io-threads N]
        [--io-total S] [--io-pattern seq|rand] IMAGE
IMAGE is [POOL/[NAMESPACE/]]NAME; sizes take K/M/G/T suffixes (--size
without a suffix is in MiB, as in rbd).`

// rbdCommand holds what every verb shares.
type rbdCommand struct {
	conn      cephconf.Args
	radosConn *rados.Conn
	pool      string
	ns        string
	stdout    io.Writer
	stderr    io.Writer
}

func runRBD(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	conn, rest, err := cephconf.ParseArgs(args)
	if err != nil {
		return err
	}
	c := &rbdCommand{conn: conn, pool: "rbd", stdout: stdout, stderr: stderr}
	defer func() {
		if c.radosConn != nil {
			_ = c.radosConn.Close()
		}
	}()
	// -p/--pool and --namespace may come anywhere
	var verbArgs []string
	for i := 0; i < len(rest); i++ {
		switch a := rest[i]; {
		case a == "-p" || a == "--pool" || a == "--namespace":
			if i+1 >= len(rest) {
				return fmt.Errorf("%s needs a value", a)
			}
			if a == "--namespace" {
				c.ns = rest[i+1]
			} else {
				c.pool = rest[i+1]
			}
			i++
		case strings.HasPrefix(a, "--pool="):
			c.pool = strings.TrimPrefix(a, "--pool=")
		case strings.HasPrefix(a, "--namespace="):
			c.ns = strings.TrimPrefix(a, "--namespace=")
		default:
			verbArgs = append(verbArgs, a)
		}
	}
	if len(verbArgs) == 0 || verbArgs[0] == "help" || verbArgs[0] == "-h" || verbArgs[0] == "--help" {
		fmt.Fprintln(stderr, rbdUsage)
		if len(verbArgs) == 0 {
			return errors.New("missing verb")
		}
		return nil
	}
	verb, vargs := verbArgs[0], verbArgs[1:]
	switch verb {
	case "create":
		return c.create(ctx, vargs)
	case "info":
		return c.info(ctx, vargs)
	case "ls", "list":
		return c.list(ctx, vargs)
	case "rm", "remove":
		return c.remove(ctx, vargs)
	case "rename", "mv":
		return c.rename(ctx, vargs)
	case "resize":
		return c.resize(ctx, vargs)
	case "snap":
		return c.snap(ctx, vargs)
	case "clone":
		return c.clone(ctx, vargs)
	case "flatten":
		return c.flatten(ctx, vargs)
	case "image-meta":
		return c.imageMeta(ctx, vargs)
	case "import":
		return c.importImage(ctx, vargs)
	case "export":
		return c.exportImage(ctx, vargs)
	case "bench":
		return c.bench(ctx, vargs)
	case "status":
		return c.status(ctx, vargs)
	case "lock":
		return c.lockList(ctx, vargs)
	}
	fmt.Fprintln(stderr, rbdUsage)
	return fmt.Errorf("unknown verb %q", verb)
}

// flags parses fs over args, letting flags and positional arguments
// interleave as rbd does; it returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rbd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// rbdSizeRE matches sizes such as 10, 4K, 4KiB, 1G, 512B.
var rbdSizeRE = regexp.MustCompile(`^(?i)([0-9]+)\s*([KMGTP]?)(I?B)?$`)

// rbdSize parses a size; bare numbers are in units of def bytes.
func rbdSize(s string, def int64) (int64, error) {
	m := rbdSizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	mult := def
	switch strings.ToUpper(m[2]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	case "P":
		mult = 1 << 50
	case "":
		if m[3] != "" {
			mult = 1
		}
	}
	v, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || v > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}

// withImage opens sp's image and runs f.
func (c *rbdCommand) withImage(ctx context.Context, sp imageSpec, opts rbd.OpenOptions, f func(img *rbd.Image) error) error {
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		img, err := rbd.Open(ctx, ioc, sp.name, opts)
		if err != nil {
			return err
		}
		ferr := f(img)
		cerr := img.Close()
		if ferr != nil {
			return ferr
		}
		return cerr
	})
}

// withPool connects to the cluster (once per command) and runs f with an
// I/O context for sp's pool and namespace.
func (c *rbdCommand) withPool(ctx context.Context, sp imageSpec, f func(ioc *rados.IOContext) error) error {
	if c.radosConn == nil {
		conn, err := rados.ConnectFromConf(ctx, c.conn)
		if err != nil {
			return err
		}
		c.radosConn = conn
	}
	ioc, err := c.radosConn.IOContext(ctx, sp.pool, sp.ns)
	if err != nil {
		return err
	}
	return f(ioc)
}
