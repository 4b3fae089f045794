package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
)

// `purerbd rados`: object operations with the `rados` tool's verbs,
// argument order and output formats, so scripts and outputs compare line
// by line.

const radosUsage = `usage: purerbd rados [-c ceph.conf] [--id NAME] [-k keyring] [-m mons] -p POOL [-N NS] <verb> ...
verbs:
  ls [--all]                       list objects (--all: every namespace, "ns<TAB>name")
  put OBJ INFILE [--offset N]      write an object from a file (- for stdin)
  get OBJ OUTFILE                  read an object into a file (- for stdout)
  stat OBJ                         size and modification time
  rm OBJ...                        remove objects
  create OBJ                       create an object (fails if it exists)
  truncate OBJ LENGTH              set an object's size
  setxattr OBJ NAME [VALUE]        set an xattr (value from stdin when omitted)
  getxattr OBJ NAME                print an xattr's value
  listxattr OBJ                    list xattr names
  rmxattr OBJ NAME                 remove an xattr
  setomapval OBJ KEY [VALUE | --input-file FILE]
  getomapval OBJ KEY [OUTFILE]     print (hexdump) or save an omap value
  listomapkeys OBJ                 list omap keys
  listomapvals OBJ                 list omap keys and values
  rmomapkey OBJ KEY                remove an omap key
  bench SECONDS write|seq|rand [-t N] [-b SIZE] [--no-cleanup] [--run-name NAME]
  cleanup [--run-name NAME]        remove what 'bench write --no-cleanup' left`

// radosChunk is the size of one read or write of put and get (the rados
// tool's default op size).
const radosChunk = 4 << 20

// radosCommand holds what every verb shares.
type radosCommand struct {
	args      cephconf.Args
	pool, ns  string
	all       bool
	offset    uint64
	inputFile string
	bench     benchOptions
	conn      *rados.Conn
	io        *rados.IOContext
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
}

func runRados(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runRadosWithInput(ctx, args, os.Stdin, stdout, stderr)
}

func runRadosWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	connArgs, rest, err := cephconf.ParseArgs(args)
	if err != nil {
		return err
	}
	c := &radosCommand{args: connArgs, stdin: stdin, stdout: stdout, stderr: stderr, bench: defaultBenchOptions()}
	defer func() {
		if c.conn != nil {
			_ = c.conn.Close()
		}
	}()
	pos, err := c.parseOptions(rest)
	if err != nil {
		return err
	}
	if len(pos) == 0 || pos[0] == "help" || pos[0] == "-h" || pos[0] == "--help" {
		fmt.Fprintln(stderr, radosUsage)
		if len(pos) == 0 {
			return errors.New("missing verb")
		}
		return nil
	}
	verb, vargs := pos[0], pos[1:]
	need := map[string]int{"ls": 0, "put": 2, "get": 2, "stat": 1, "rm": 1, "create": 1, "truncate": 2,
		"setxattr": 2, "getxattr": 2, "listxattr": 1, "rmxattr": 2, "setomapval": 2, "getomapval": 2,
		"listomapkeys": 1, "listomapvals": 1, "rmomapkey": 2, "bench": 2, "cleanup": 0}
	n, ok := need[verb]
	if !ok {
		fmt.Fprintln(stderr, radosUsage)
		return fmt.Errorf("unknown verb %q", verb)
	}
	if len(vargs) < n {
		return fmt.Errorf("%s: needs %d argument(s)\n%s", verb, n, radosUsage)
	}
	if c.pool == "" {
		return errors.New("pool name was not specified (-p POOL)")
	}
	if err := c.connect(ctx); err != nil {
		return err
	}
	switch verb {
	case "ls":
		return c.ls(ctx)
	case "put":
		return c.put(ctx, vargs[0], vargs[1])
	case "get":
		return c.get(ctx, vargs[0], vargs[1])
	case "stat":
		return c.stat(ctx, vargs[0])
	case "rm":
		return c.rm(ctx, vargs)
	case "create":
		return c.wrap("creating", vargs[0], c.io.Create(ctx, vargs[0], true))
	case "truncate":
		size, err := strconv.ParseUint(vargs[1], 10, 64)
		if err != nil {
			return fmt.Errorf("bad length %q", vargs[1])
		}
		return c.wrap("truncating", vargs[0], c.io.Truncate(ctx, vargs[0], size))
	case "setxattr":
		return c.setxattr(ctx, vargs)
	case "getxattr":
		v, err := c.io.GetXattr(ctx, vargs[0], vargs[1])
		if err != nil {
			return c.wrap("getting xattr", vargs[0]+"/"+vargs[1], err)
		}
		_, err = c.stdout.Write(v)
		return err
	case "listxattr":
		return c.listxattr(ctx, vargs[0])
	case "rmxattr":
		return c.wrap("removing xattr", vargs[0]+"/"+vargs[1], c.io.RmXattr(ctx, vargs[0], vargs[1]))
	case "setomapval":
		return c.setomapval(ctx, vargs)
	case "getomapval":
		return c.getomapval(ctx, vargs)
	case "listomapkeys":
		return c.listomap(ctx, vargs[0], false)
	case "listomapvals":
		return c.listomap(ctx, vargs[0], true)
	case "rmomapkey":
		return c.wrap("removing omap key", vargs[0]+"/"+vargs[1], c.io.OmapRm(ctx, vargs[0], []string{vargs[1]}))
	case "bench":
		return c.runBench(ctx, vargs)
	case "cleanup":
		return c.cleanup(ctx)
	}
	return nil
}

// parseOptions takes the rados tool's options out of args, wherever they
// are, and returns the positional arguments.
func (c *radosCommand) parseOptions(args []string) ([]string, error) {
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			if eq := strings.IndexByte(a, '='); eq >= 0 {
				name, val, hasVal = a[:eq], a[eq+1:], true
			}
		}
		value := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "-p", "--pool":
			c.pool, err = value()
		case "-N", "--namespace":
			c.ns, err = value()
		case "--all":
			c.all = true
		case "--offset":
			var v string
			if v, err = value(); err == nil {
				c.offset, err = strconv.ParseUint(v, 10, 64)
			}
		case "--input-file":
			c.inputFile, err = value()
		case "-t", "--concurrent-ios":
			var v string
			if v, err = value(); err == nil {
				c.bench.threads, err = strconv.Atoi(v)
			}
		case "-b", "--block-size":
			var v string
			if v, err = value(); err == nil {
				c.bench.size, err = radosSize(v)
			}
		case "--no-cleanup":
			c.bench.noCleanup = true
		case "--run-name":
			c.bench.runName, err = value()
		default:
			if strings.HasPrefix(a, "-") && a != "-" {
				return nil, fmt.Errorf("unknown option %s\n%s", a, radosUsage)
			}
			pos = append(pos, a)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return pos, nil
}

// radosSize parses a byte count with an optional K/M/G suffix (binary).
func radosSize(s string) (int, error) {
	mult := 1
	t := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "i"))
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.Atoi(t)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}

func (c *radosCommand) connect(ctx context.Context) error {
	conn, err := rados.ConnectFromConf(ctx, c.args)
	if err != nil {
		return err
	}
	c.conn = conn
	ns := c.ns
	if c.all {
		ns = rados.AllNamespaces
	}
	if c.io, err = conn.IOContext(ctx, c.pool, ns); err != nil {
		return fmt.Errorf("error opening pool %s: %s", c.pool, errnoText(err))
	}
	return nil
}

// wrap words an error as the rados tool does: "error removing
// rbd/obj: (2) No such file or directory".
func (c *radosCommand) wrap(what, obj string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("error %s %s/%s: %s", what, c.pool, obj, errnoText(err))
}

// errnoText formats err as Ceph's cpp_strerror does, "(2) No such file
// or directory", when it carries an errno.
func errnoText(err error) string {
	var e rados.Errno
	if errors.As(err, &e) {
		s := e.Error()
		r := []rune(s)
		if len(r) > 0 {
			r[0] = unicode.ToUpper(r[0])
		}
		return fmt.Sprintf("(%d) %s", int32(e), string(r))
	}
	if errors.Is(err, rados.ErrPoolNotFound) {
		return "(2) No such file or directory"
	}
	return err.Error()
}

func (c *radosCommand) ls(ctx context.Context) error {
	w := bufio.NewWriter(c.stdout)
	defer w.Flush()
	for o, err := range c.io.Objects(ctx) {
		if err != nil {
			return fmt.Errorf("error listing pool %s: %s", c.pool, errnoText(err))
		}
		if c.all {
			fmt.Fprintf(w, "%s\t%s\n", o.Namespace, o.Name)
		} else {
			fmt.Fprintln(w, o.Name)
		}
	}
	return nil
}

func (c *radosCommand) put(ctx context.Context, oid, path string) error {
	in := c.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	buf := make([]byte, radosChunk)
	off := c.offset
	for first := true; ; first = false {
		n, err := io.ReadFull(in, buf)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return err
		}
		switch {
		case first && c.offset == 0:
			// the object is replaced, also when the input is empty
			if werr := c.io.WriteFull(ctx, oid, buf[:n]); werr != nil {
				return c.wrap("putting", oid, werr)
			}
		case n > 0:
			if werr := c.io.Write(ctx, oid, buf[:n], off); werr != nil {
				return c.wrap("putting", oid, werr)
			}
		case first:
			if werr := c.io.Create(ctx, oid, false); werr != nil {
				return c.wrap("putting", oid, werr)
			}
		}
		off += uint64(n)
		if n < len(buf) {
			return nil
		}
	}
}

func (c *radosCommand) get(ctx context.Context, oid, path string) error {
	out := c.stdout
	var f *os.File
	if path != "-" {
		var err error
		if f, err = os.Create(path); err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	buf := make([]byte, radosChunk)
	for off := uint64(0); ; {
		n, err := c.io.Read(ctx, oid, buf, off)
		if err != nil {
			return c.wrap("getting", oid, err)
		}
		if _, err := out.Write(buf[:n]); err != nil {
			return err
		}
		off += uint64(n)
		if n < len(buf) {
			break
		}
	}
	if f != nil {
		return f.Close()
	}
	return nil
}

func (c *radosCommand) stat(ctx context.Context, oid string) error {
	st, err := c.io.Stat(ctx, oid)
	if err != nil {
		return fmt.Errorf("error stat-ing %s/%s: %s", c.pool, oid, errnoText(err))
	}
	fmt.Fprintf(c.stdout, "%s/%s mtime %s, size %d\n", c.pool, oid,
		st.ModTime.Local().Truncate(1e9).Format("2006-01-02T15:04:05.000000-0700"), st.Size)
	return nil
}

func (c *radosCommand) rm(ctx context.Context, oids []string) error {
	for _, oid := range oids {
		if err := c.io.Remove(ctx, oid); err != nil {
			// the rados tool prints pool>object here
			return fmt.Errorf("error removing %s>%s: %s", c.pool, oid, errnoText(err))
		}
	}
	return nil
}

// value returns a verb's value argument, or the input file's contents,
// or standard input.
func (c *radosCommand) value(args []string, at int) ([]byte, error) {
	switch {
	case len(args) > at:
		return []byte(args[at]), nil
	case c.inputFile != "":
		return os.ReadFile(c.inputFile)
	}
	return io.ReadAll(c.stdin)
}

func (c *radosCommand) setxattr(ctx context.Context, args []string) error {
	v, err := c.value(args, 2)
	if err != nil {
		return err
	}
	return c.wrap("setting xattr", args[0]+"/"+args[1], c.io.SetXattr(ctx, args[0], args[1], v))
}

func (c *radosCommand) listxattr(ctx context.Context, oid string) error {
	xs, err := c.io.ListXattrs(ctx, oid)
	if err != nil {
		return c.wrap("getting xattr set", oid, err)
	}
	names := make([]string, 0, len(xs))
	for n := range xs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(c.stdout, n)
	}
	return nil
}

func (c *radosCommand) setomapval(ctx context.Context, args []string) error {
	v, err := c.value(args, 2)
	if err != nil {
		return err
	}
	return c.wrap("setting omap value", args[0], c.io.OmapSet(ctx, args[0], map[string][]byte{args[1]: v}))
}

func (c *radosCommand) getomapval(ctx context.Context, args []string) error {
	oid, key := args[0], args[1]
	vals, err := c.io.OmapGetValsByKeys(ctx, oid, []string{key})
	if err != nil {
		return c.wrap("getting omap value", oid, err)
	}
	v, ok := vals[key]
	if !ok {
		// the rados tool says so on standard output, and fails
		fmt.Fprintf(c.stdout, "No such key: %s/%s/%s\n", c.pool, oid, key)
		return fmt.Errorf("no omap key %q in %s/%s", key, c.pool, oid)
	}
	if len(args) > 2 {
		fmt.Fprintf(c.stderr, "Writing to %s\n", args[2])
		return os.WriteFile(args[2], v, 0o644)
	}
	w := bufio.NewWriter(c.stdout)
	defer w.Flush()
	writeValue(w, v)
	return nil
}

func (c *radosCommand) listomap(ctx context.Context, oid string, vals bool) error {
	w := bufio.NewWriter(c.stdout)
	defer w.Flush()
	for kv, err := range c.io.Omap(ctx, oid, "") {
		if err != nil {
			return c.wrap("getting omap keys", oid, err)
		}
		fmt.Fprintln(w, kv.Key)
		if vals {
			writeValue(w, kv.Value)
		}
	}
	return nil
}

// writeValue prints an omap value as the rados tool does: a size line,
// Ceph's hexdump, a blank line.
func writeValue(w io.Writer, v []byte) {
	fmt.Fprintf(w, "value (%d bytes) :\n", len(v))
	hexdump(w, v)
	fmt.Fprintln(w)
}

// hexdump writes p as Ceph's bufferlist::hexdump does (hexdump -C
// style, without collapsing repeated lines), ending with the length.
func hexdump(w io.Writer, p []byte) {
	if len(p) == 0 {
		return
	}
	var b strings.Builder
	for off := 0; off < len(p); off += 16 {
		line := p[off:min(off+16, len(p))]
		fmt.Fprintf(&b, "%08x  ", off)
		for i := 0; i < 16; i++ {
			if i < len(line) {
				fmt.Fprintf(&b, "%02x ", line[i])
			} else {
				b.WriteString("   ")
			}
			if i == 7 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(" |")
		for _, ch := range line {
			if ch >= 32 && ch < 127 {
				b.WriteByte(ch)
			} else {
				b.WriteByte('.')
			}
		}
		b.WriteString("|\n")
	}
	fmt.Fprintf(&b, "%08x\n", len(p))
	io.WriteString(w, b.String())
}
