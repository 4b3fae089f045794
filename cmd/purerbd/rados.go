package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
)

// `purerbd rados`: object operations with the `rados` tool's verbs,
// argument order and output formats, so scripts and outputs compare line
// by line.

// radosChunk is the size of one read or write of put and get (the rados
// tool's default op size).
const radosChunk = 4 << 20

// radosCommand holds what every verb shares: the rados tool's options,
// which it takes anywhere on the line whatever the verb, and the
// connection.
type radosCommand struct {
	g         *globals
	pool, ns  string
	all       bool
	offset    uint64
	inputFile string
	out       outputFormat
	indent    bool // --format json-pretty
	target    copyTarget
	lockOpt   lockOptions
	bench     benchOptions
	purgeOpt  purgeOptions
	// cppoolForce is cppool's --yes-i-really-mean-it
	cppoolForce bool
	conn        *rados.Conn
	io          *rados.IOContext
	stdin       io.Reader
	stdout      io.Writer
	stderr      io.Writer
}

// newRadosCommand is the rados group: its options and its verbs.
func newRadosCommand(g *globals) *cli.Command {
	c := &radosCommand{g: g, bench: defaultBenchOptions()}
	group := &cli.Command{
		Name:    "rados",
		Summary: "pool and object operations like the rados tool (ls, put, get, omap, locks, watch, snapshots, df, purge, cppool, bench)",
		// the rados tool exits 1 on every mistake in its command line
		UsageStatus: func(cli.ErrorKind) int { return 1 },
		Before:      c.connect,
	}
	group.String(&c.pool, "-p, --pool POOL", "the pool (every verb needs one)")
	group.String(&c.ns, "-N, --namespace NS", "the namespace")
	group.Bool(&c.all, "--all", "ls: objects of every namespace, as \"NS<TAB>NAME\"")
	group.Uint64(&c.offset, "--offset N", "put: write at this offset instead of replacing the object")
	group.String(&c.inputFile, "--input-file FILE", "setxattr, setomapval: the value from FILE")
	c.out.format = "plain"
	group.String(&c.out.format, "-f, --format FORMAT", "json, or plain text (df, ls, lock)")
	group.Bool(&c.out.pretty, "--pretty-format", "indent the JSON output")
	group.String(&c.target.pool, "--target-pool POOL", "cp: the pool to copy into")
	group.String(&c.target.ns, "--target-nspace NS", "cp: the namespace to copy into (default: the default namespace)")
	group.String(&c.target.locator, "--target-locator KEY", "cp: the locator key of the copy")
	c.lockOpt.register(group)
	group.Int(&c.bench.threads, "-t, --concurrent-ios N", "bench: concurrent operations")
	group.Func("-b, --block-size SIZE", "bench write: object size (default 4M)", func(v []string) error {
		n, err := radosSize(v[0])
		c.bench.size = n
		return err
	})
	group.Bool(&c.bench.noCleanup, "--no-cleanup", "bench write: leave the objects for seq, rand and cleanup")
	group.String(&c.bench.runName, "--run-name NAME", "bench, cleanup: the object recording a write run (default "+benchMetaDefault+")")
	verb := func(name, args string, min int, summary string, run func(ctx context.Context, args []string) error) *cli.Command {
		return &cli.Command{Name: name, Summary: summary, Args: args, MinArgs: min, MaxArgs: cli.Unlimited,
			Run: func(ctx context.Context, inv *cli.Invocation) error { return run(ctx, inv.Args) }}
	}
	return group.Add(
		verb("lspools", "", 0, "list pools", func(ctx context.Context, _ []string) error { return c.lspools(ctx) }),
		verb("df", "", 0, "usage per pool (-p: one pool) and in total", func(ctx context.Context, _ []string) error { return c.df(ctx) }),
		verb("ls", "", 0, "list objects (--all: every namespace)", func(ctx context.Context, _ []string) error { return c.ls(ctx) }),
		verb("put", "OBJ INFILE", 2, "write an object from a file (- for stdin)", func(ctx context.Context, a []string) error {
			return c.put(ctx, a[0], a[1])
		}),
		verb("get", "OBJ OUTFILE", 2, "read an object into a file (- for stdout)", func(ctx context.Context, a []string) error {
			return c.get(ctx, a[0], a[1])
		}),
		verb("stat", "OBJ", 1, "size and modification time", func(ctx context.Context, a []string) error { return c.stat(ctx, a[0], false) }),
		verb("stat2", "OBJ", 1, "size and modification time to the microsecond", func(ctx context.Context, a []string) error {
			return c.stat(ctx, a[0], true)
		}),
		verb("rm", "OBJ...", 1, "remove objects", c.rm),
		verb("create", "OBJ", 1, "create an object (fails if it exists)", func(ctx context.Context, a []string) error {
			return c.wrap("creating", a[0], c.io.Create(ctx, a[0], true))
		}),
		verb("truncate", "OBJ LENGTH", 2, "set an object's size", func(ctx context.Context, a []string) error {
			size, err := strconv.ParseUint(a[1], 10, 64)
			if err != nil {
				return fmt.Errorf("bad length %q", a[1])
			}
			return c.wrap("truncating", a[0], c.io.Truncate(ctx, a[0], size))
		}),
		verb("setxattr", "OBJ NAME [VALUE]", 2, "set an xattr (value from --input-file or stdin when omitted)", c.setxattr),
		verb("getxattr", "OBJ NAME", 2, "print an xattr's value", func(ctx context.Context, a []string) error {
			v, err := c.io.GetXattr(ctx, a[0], a[1])
			if err != nil {
				return c.wrap("getting xattr", a[0]+"/"+a[1], err)
			}
			_, err = c.stdout.Write(v)
			return err
		}),
		verb("listxattr", "OBJ", 1, "list xattr names", func(ctx context.Context, a []string) error { return c.listxattr(ctx, a[0]) }),
		verb("rmxattr", "OBJ NAME", 2, "remove an xattr", func(ctx context.Context, a []string) error {
			return c.wrap("removing xattr", a[0]+"/"+a[1], c.io.RmXattr(ctx, a[0], a[1]))
		}),
		verb("setomapval", "OBJ KEY [VALUE]", 2, "set an omap value (from --input-file or stdin when omitted)", c.setomapval),
		verb("getomapval", "OBJ KEY [OUTFILE]", 2, "print (hexdump) or save an omap value", c.getomapval),
		verb("listomapkeys", "OBJ", 1, "list omap keys", func(ctx context.Context, a []string) error { return c.listomap(ctx, a[0], false) }),
		verb("listomapvals", "OBJ", 1, "list omap keys and values", func(ctx context.Context, a []string) error { return c.listomap(ctx, a[0], true) }),
		verb("clearomap", "OBJ...", 1, "remove every omap key of the objects", c.clearomap),
		verb("rmomapkey", "OBJ KEY", 2, "remove an omap key", func(ctx context.Context, a []string) error {
			return c.wrap("removing omap key", a[0]+"/"+a[1], c.io.OmapRm(ctx, a[0], []string{a[1]}))
		}),
		verb("append", "OBJ INFILE", 2, "append a file (- for stdin) to an object", func(ctx context.Context, a []string) error {
			return c.appendFile(ctx, a[0], a[1])
		}),
		verb("cp", "OBJ [TARGET-OBJ]", 1, "copy an object (--target-pool: into another pool)", c.cp),
		verb("touch", "OBJ [TIMESTAMP]", 1, "create an object if missing and set its modification time", c.touch),
		verb("listwatchers", "OBJ", 1, "list the watchers of an object", func(ctx context.Context, a []string) error {
			return c.listwatchers(ctx, a[0])
		}),
		verb("watch", "OBJ", 1, "watch an object and print its notifications until enter is pressed", func(ctx context.Context, a []string) error {
			return c.watch(ctx, a[0])
		}),
		verb("notify", "OBJ MESSAGE", 2, "notify the watchers of an object and print their replies", c.notify),
		verb("listsnaps", "OBJ", 1, "list an object's clones and the snapshots they serve", func(ctx context.Context, a []string) error {
			return c.listsnaps(ctx, a[0])
		}),
		c.purgeCommand(),
		c.cppoolCommand(),
		verb("lssnap", "", 0, "list pool snapshots", func(ctx context.Context, _ []string) error { return c.lssnap(ctx) }),
		verb("mksnap", "SNAP", 1, "take a pool snapshot", c.mksnap),
		verb("rmsnap", "SNAP", 1, "remove a pool snapshot", c.rmsnap),
		verb("rollback", "OBJ SNAP", 2, "restore an object to its state at a pool snapshot", c.rollback),
		verb("getomapheader", "OBJ [OUTFILE]", 1, "print (hexdump) or save an object's omap header", c.getomapheader),
		verb("setomapheader", "OBJ VALUE", 2, "set an object's omap header", func(ctx context.Context, a []string) error {
			return c.wrap("setting omap value", a[0], c.io.OmapSetHeader(ctx, a[0], []byte(a[1])))
		}),
		c.lockCommand(),
		verb("bench", "SECONDS write|seq|rand", 2, "the rados tool's benchmark (-t, -b, --no-cleanup, --run-name)", c.runBench),
		verb("cleanup", "", 0, "remove what 'bench write --no-cleanup' left", func(ctx context.Context, _ []string) error { return c.cleanup(ctx) }),
	)
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

// poolless says whether a verb runs without -p, as the rados tool's
// lspools, df, purge and cppool do (the last two name their pools as
// arguments).
func poolless(verb string) bool {
	switch verb {
	case "lspools", "df", "purge", "cppool":
		return true
	}
	return false
}

// connect opens the pool (and namespace) before any verb runs; the
// connection closes after it.
func (c *radosCommand) connect(ctx context.Context, inv *cli.Invocation) (func(), error) {
	c.stdin, c.stdout, c.stderr = inv.Stdin, inv.Stdout, inv.Stderr
	switch c.out.format {
	case "plain", "json":
	case "json-pretty":
		c.out.format, c.indent = "json", true
	default:
		// the rados tool exits with -EINVAL here, as a byte
		fmt.Fprintf(c.stderr, "unrecognized format: %s\n", c.out.format)
		return nil, cli.ExitStatus(256 - int(syscall.EINVAL))
	}
	if c.pool == "" && !poolless(inv.Command.Name) {
		return nil, errors.New("pool name was not specified (-p POOL)")
	}
	conn, err := c.g.connectRados(ctx)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	if c.pool == "" {
		return func() { _ = conn.Close() }, nil
	}
	ns := c.ns
	if c.all {
		ns = rados.AllNamespaces
	}
	if c.io, err = conn.IOContext(ctx, c.pool, ns); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("error opening pool %s: %s", c.pool, errnoText(err))
	}
	return func() { _ = conn.Close() }, nil
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
	var se syscall.Errno
	if !errors.As(err, &e) && errors.As(err, &se) {
		e = rados.Errno(se)
	}
	if e != 0 {
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

// writeJSON writes v as the rados tool's formatter does: compact
// without a newline (--pretty-format adds one where the verb says so),
// or indented by four spaces and ending in a newline for json-pretty.
func (c *radosCommand) writeJSON(v any, newlineIfPretty bool) error {
	var b []byte
	var err error
	if c.indent {
		b, err = json.MarshalIndent(v, "", "    ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	if c.indent || (newlineIfPretty && c.out.pretty) {
		b = append(b, '\n')
	}
	_, err = c.stdout.Write(b)
	return err
}

// lsObject is one object of `rados ls --format json`.
type lsObject struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Locator   string `json:"locator,omitempty"`
}

func (c *radosCommand) ls(ctx context.Context) error {
	w := bufio.NewWriter(c.stdout)
	defer w.Flush()
	objs := []lsObject{}
	for o, err := range c.io.Objects(ctx) {
		if err != nil {
			return fmt.Errorf("error listing pool %s: %s", c.pool, errnoText(err))
		}
		if c.out.json() {
			objs = append(objs, lsObject{Namespace: o.Namespace, Name: o.Name, Locator: o.Locator})
			continue
		}
		if c.all {
			fmt.Fprintf(w, "%s\t", o.Namespace)
		}
		if o.Locator != "" {
			fmt.Fprintf(w, "%s\t%s\n", o.Name, o.Locator)
		} else {
			fmt.Fprintln(w, o.Name)
		}
	}
	if c.out.json() {
		w.Flush()
		return c.writeJSON(objs, true)
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

// stat prints an object's size and modification time: in whole seconds
// as stat does, or to the microsecond as stat2 does.
func (c *radosCommand) stat(ctx context.Context, oid string, precise bool) error {
	st, err := c.io.Stat(ctx, oid)
	if err != nil {
		return fmt.Errorf("error stat-ing %s/%s: %s", c.pool, oid, errnoText(err))
	}
	mtime := st.ModTime.Local()
	if !precise {
		mtime = mtime.Truncate(1e9)
	}
	fmt.Fprintf(c.stdout, "%s/%s mtime %s, size %d\n", c.pool, oid, mtime.Format("2006-01-02T15:04:05.000000-0700"), st.Size)
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

// hexdump writes p as Ceph's bufferlist::hexdump does: hexdump -C
// style, ending with the length. As there, a row of one repeated byte
// that repeats the row before it is left out, a run of them shown as
// one "*" line; the last row is always printed.
func hexdump(w io.Writer, p []byte) {
	if len(p) == 0 {
		return
	}
	var b strings.Builder
	last := p[0]
	wasSame, didStar := false, false
	for off := 0; off < len(p); off += 16 {
		line := p[off:min(off+16, len(p))]
		if off+16 < len(p) {
			// Ceph's test: the row's bytes all equal the first byte
			// of the run, which a row starting differently renews
			same := true
			for i, ch := range line {
				if ch == last {
					continue
				}
				if i == 0 {
					last, wasSame, didStar = ch, false, false
				} else {
					same = false
				}
			}
			if same {
				if wasSame {
					if !didStar {
						b.WriteString("*\n")
						didStar = true
					}
					continue
				}
				wasSame = true
			} else {
				wasSame, didStar = false, false
			}
		}
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
