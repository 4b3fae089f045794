package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

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

// imageSpec is [pool/[namespace/]]name[@snap].
type imageSpec struct {
	pool, ns, name, snap string
}

func (c *rbdCommand) parseSpec(s string, wantSnap bool) (imageSpec, error) {
	sp := imageSpec{pool: c.pool, ns: c.ns}
	if at := strings.IndexByte(s, '@'); at >= 0 {
		sp.snap = s[at+1:]
		s = s[:at]
	}
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 1:
		sp.name = parts[0]
	case 2:
		sp.pool, sp.name = parts[0], parts[1]
	case 3:
		sp.pool, sp.ns, sp.name = parts[0], parts[1], parts[2]
	default:
		return sp, fmt.Errorf("bad image spec %q", s)
	}
	if sp.name == "" || sp.pool == "" {
		return sp, fmt.Errorf("bad image spec %q", s)
	}
	if wantSnap && sp.snap == "" {
		return sp, fmt.Errorf("image spec %q needs @snapshot", s)
	}
	return sp, nil
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

// createFlags are the image-shaping options of create, import and clone.
type createFlags struct {
	objectSize, order, features, stripeUnit, stripeCount, dataPool *string
}

func addCreateFlags(fs *flag.FlagSet) createFlags {
	return createFlags{
		objectSize:  fs.String("object-size", "", "object size (e.g. 4M)"),
		order:       fs.String("order", "", "object order (12..25)"),
		features:    fs.String("image-feature", "", "comma-separated image features"),
		stripeUnit:  fs.String("stripe-unit", "", "stripe unit"),
		stripeCount: fs.String("stripe-count", "", "stripe count"),
		dataPool:    fs.String("data-pool", "", "data pool"),
	}
}

func (f createFlags) options() (rbd.CreateOptions, error) {
	var o rbd.CreateOptions
	if *f.order != "" {
		v, err := strconv.ParseUint(*f.order, 10, 8)
		if err != nil {
			return o, fmt.Errorf("--order: %w", err)
		}
		o.Order = uint8(v)
	}
	if *f.objectSize != "" {
		s, err := rbdSize(*f.objectSize, 1)
		if err != nil {
			return o, fmt.Errorf("--object-size: %w", err)
		}
		order := uint8(0)
		for uint64(1)<<order < uint64(s) {
			order++
		}
		if uint64(1)<<order != uint64(s) {
			return o, fmt.Errorf("--object-size %s is not a power of two", *f.objectSize)
		}
		o.Order = order
	}
	if *f.features != "" {
		feat, err := rbd.ParseFeatures(*f.features)
		if err != nil {
			return o, err
		}
		if feat == 0 {
			feat = rbd.FeatureNone
		}
		o.Features = feat
	}
	if *f.stripeUnit != "" {
		s, err := rbdSize(*f.stripeUnit, 1)
		if err != nil {
			return o, fmt.Errorf("--stripe-unit: %w", err)
		}
		o.StripeUnit = uint64(s)
	}
	if *f.stripeCount != "" {
		v, err := strconv.ParseUint(*f.stripeCount, 10, 64)
		if err != nil {
			return o, fmt.Errorf("--stripe-count: %w", err)
		}
		o.StripeCount = v
	}
	o.DataPool = *f.dataPool
	return o, nil
}

func (c *rbdCommand) create(ctx context.Context, args []string) error {
	fs := newFlagSet("create", c.stderr)
	size := fs.String("size", "", "image size (MiB without a suffix)")
	s := fs.String("s", "", "image size (short for --size)")
	cf := addCreateFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *size == "" {
		*size = *s
	}
	if len(pos) != 1 || *size == "" {
		return errors.New("usage: create --size SIZE IMAGE")
	}
	sz, err := rbdSize(*size, 1<<20)
	if err != nil {
		return err
	}
	opts, err := cf.options()
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		return rbd.Create(ctx, ioc, sp.name, sz, opts)
	})
}

// infoJSON mirrors `rbd info --format json`.
type infoJSON struct {
	Name            string     `json:"name"`
	ID              string     `json:"id"`
	Size            uint64     `json:"size"`
	Objects         uint64     `json:"objects"`
	Order           uint8      `json:"order"`
	ObjectSize      uint64     `json:"object_size"`
	SnapshotCount   int        `json:"snapshot_count"`
	BlockNamePrefix string     `json:"block_name_prefix"`
	Format          int        `json:"format"`
	Features        []string   `json:"features"`
	OpFeatures      []string   `json:"op_features"`
	Flags           []string   `json:"flags"`
	StripeUnit      uint64     `json:"stripe_unit,omitempty"`
	StripeCount     uint64     `json:"stripe_count,omitempty"`
	DataPool        string     `json:"data_pool,omitempty"`
	CreateTimestamp string     `json:"create_timestamp,omitempty"`
	Parent          *parentOut `json:"parent,omitempty"`
	Protected       string     `json:"protected,omitempty"`
}

type parentOut struct {
	PoolID        int64  `json:"pool_id"`
	PoolNamespace string `json:"pool_namespace"`
	ImageID       string `json:"id"`
	SnapID        uint64 `json:"snap_id"`
	Overlap       uint64 `json:"overlap"`
}

func opFeatureNames(f uint64) []string {
	names := []string{}
	for _, n := range []struct {
		bit  uint64
		name string
	}{{rbd.OpFeatureCloneParent, "clone-parent"}, {rbd.OpFeatureCloneChild, "clone-child"},
		{rbd.OpFeatureGroup, "group"}, {rbd.OpFeatureSnapTrash, "snap-trash"}} {
		if f&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	return names
}

func flagNames(f uint64) []string {
	names := []string{}
	if f&rbd.FlagObjectMapInvalid != 0 {
		names = append(names, "object map invalid")
	}
	if f&rbd.FlagFastDiffInvalid != 0 {
		names = append(names, "fast diff invalid")
	}
	return names
}

func (c *rbdCommand) info(ctx context.Context, args []string) error {
	fs := newFlagSet("info", c.stderr)
	format := fs.String("format", "plain", "plain or json")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: info IMAGE[@SNAP]")
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true, Snapshot: sp.snap}, func(img *rbd.Image) error {
		info, err := img.Stat(ctx)
		if err != nil {
			return err
		}
		out := infoJSON{
			Name: info.Name, ID: info.ID, Size: uint64(info.Size), Objects: info.NumObjects, Order: info.Order,
			ObjectSize: info.ObjectSize, SnapshotCount: len(info.Snapshots), BlockNamePrefix: info.BlockNamePrefix,
			Format: 2, Features: info.Features.Names(), OpFeatures: opFeatureNames(info.OpFeatures),
			Flags: flagNames(info.Flags),
		}
		if out.Features == nil {
			out.Features = []string{}
		}
		if info.Features&rbd.FeatureStripingV2 != 0 {
			out.StripeUnit, out.StripeCount = info.StripeUnit, info.StripeCount
		}
		if info.DataPoolID >= 0 {
			out.DataPool = strconv.FormatInt(info.DataPoolID, 10)
		}
		if !info.CreateTimestamp.IsZero() {
			out.CreateTimestamp = time.Unix(info.CreateTimestamp.Unix(), 0).Format(time.ANSIC)
		}
		if info.Parent != nil {
			out.Parent = &parentOut{PoolID: info.Parent.PoolID, PoolNamespace: info.Parent.PoolNamespace,
				ImageID: info.Parent.ImageID, SnapID: info.Parent.SnapID, Overlap: uint64(info.ParentOverlap)}
		}
		if sp.snap != "" {
			for _, s := range info.Snapshots {
				if s.Name == sp.snap {
					out.Protected = strconv.FormatBool(s.Protected)
				}
			}
		}
		if *format == "json" {
			return json.NewEncoder(c.stdout).Encode(out)
		}
		w := c.stdout
		fmt.Fprintf(w, "rbd image '%s':\n", out.Name)
		fmt.Fprintf(w, "\tsize %s in %d objects\n", humanBytes(out.Size), out.Objects)
		fmt.Fprintf(w, "\torder %d (%s objects)\n", out.Order, humanBytes(out.ObjectSize))
		fmt.Fprintf(w, "\tsnapshot_count: %d\n", out.SnapshotCount)
		fmt.Fprintf(w, "\tid: %s\n", out.ID)
		if out.DataPool != "" {
			fmt.Fprintf(w, "\tdata_pool: %s\n", out.DataPool)
		}
		fmt.Fprintf(w, "\tblock_name_prefix: %s\n", out.BlockNamePrefix)
		fmt.Fprintf(w, "\tformat: 2\n")
		fmt.Fprintf(w, "\tfeatures: %s\n", strings.Join(out.Features, ", "))
		fmt.Fprintf(w, "\top_features: %s\n", strings.Join(out.OpFeatures, ", "))
		fmt.Fprintf(w, "\tflags: %s\n", strings.Join(out.Flags, ", "))
		if out.CreateTimestamp != "" {
			fmt.Fprintf(w, "\tcreate_timestamp: %s\n", out.CreateTimestamp)
		}
		if out.StripeUnit != 0 {
			fmt.Fprintf(w, "\tstripe unit: %s\n\tstripe count: %d\n", humanBytes(out.StripeUnit), out.StripeCount)
		}
		if out.Parent != nil {
			fmt.Fprintf(w, "\tparent: pool %d/%s image %s snap %d\n\toverlap: %s\n", out.Parent.PoolID,
				out.Parent.PoolNamespace, out.Parent.ImageID, out.Parent.SnapID, humanBytes(out.Parent.Overlap))
		}
		if out.Protected != "" {
			fmt.Fprintf(w, "\tprotected: %s\n", out.Protected)
		}
		return nil
	})
}

// humanBytes formats like rbd ("1 GiB", "4 MiB", "512 B").
func humanBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v == float64(uint64(v)) {
		return fmt.Sprintf("%d %s", uint64(v), units[u])
	}
	return fmt.Sprintf("%.3g %s", v, units[u])
}

func (c *rbdCommand) list(ctx context.Context, args []string) error {
	fs := newFlagSet("ls", c.stderr)
	long := fs.Bool("l", false, "long listing")
	format := fs.String("format", "plain", "plain or json")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	sp := imageSpec{pool: c.pool, ns: c.ns}
	if len(pos) == 1 {
		p, ns, _ := strings.Cut(pos[0], "/")
		sp.pool, sp.ns = p, ns
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		images, err := rbd.List(ctx, ioc)
		if err != nil {
			return err
		}
		if !*long {
			if *format == "json" {
				names := []string{}
				for _, im := range images {
					names = append(names, im.Name)
				}
				return json.NewEncoder(c.stdout).Encode(names)
			}
			for _, im := range images {
				fmt.Fprintln(c.stdout, im.Name)
			}
			return nil
		}
		type row struct {
			Image  string `json:"image"`
			ID     string `json:"id"`
			Size   uint64 `json:"size"`
			Format int    `json:"format"`
		}
		rows := []row{}
		for _, im := range images {
			img, err := rbd.Open(ctx, ioc, im.Name, rbd.OpenOptions{ReadOnly: true})
			if err != nil {
				fmt.Fprintf(c.stderr, "purerbd rbd: %s: %v\n", im.Name, err)
				continue
			}
			rows = append(rows, row{Image: im.Name, ID: im.ID, Size: uint64(img.Size()), Format: 2})
			_ = img.Close()
		}
		if *format == "json" {
			return json.NewEncoder(c.stdout).Encode(rows)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSIZE\tPARENT\tFMT\tPROT\tLOCK")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t\t2\t\t\n", r.Image, humanBytes(r.Size))
		}
		return tw.Flush()
	})
}

func (c *rbdCommand) remove(ctx context.Context, args []string) error {
	fs := newFlagSet("rm", c.stderr)
	force := fs.Bool("force", false, "remove even if the image is open elsewhere")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: rm IMAGE")
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		return rbd.Remove(ctx, ioc, sp.name, rbd.RemoveOptions{Force: *force})
	})
}

func (c *rbdCommand) rename(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: rename SRC DST")
	}
	src, err := c.parseSpec(args[0], false)
	if err != nil {
		return err
	}
	dst, err := c.parseSpec(args[1], false)
	if err != nil {
		return err
	}
	if src.pool != dst.pool || src.ns != dst.ns {
		return errors.New("rename: source and destination must be in the same pool and namespace")
	}
	return c.withPool(ctx, src, func(ioc *rados.IOContext) error {
		return rbd.Rename(ctx, ioc, src.name, dst.name)
	})
}

func (c *rbdCommand) resize(ctx context.Context, args []string) error {
	fs := newFlagSet("resize", c.stderr)
	size := fs.String("size", "", "new size (MiB without a suffix)")
	s := fs.String("s", "", "new size (short for --size)")
	allowShrink := fs.Bool("allow-shrink", false, "allow shrinking")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *size == "" {
		*size = *s
	}
	if len(pos) != 1 || *size == "" {
		return errors.New("usage: resize --size SIZE [--allow-shrink] IMAGE")
	}
	sz, err := rbdSize(*size, 1<<20)
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
		if sz < img.Size() && !*allowShrink {
			return errors.New("shrinking an image is only allowed with --allow-shrink")
		}
		return img.Resize(ctx, sz)
	})
}

func (c *rbdCommand) snap(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: snap create|ls|rm|protect|unprotect|rollback ARGS")
	}
	verb, args := args[0], args[1:]
	fs := newFlagSet("snap "+verb, c.stderr)
	format := fs.String("format", "plain", "plain or json")
	all := fs.Bool("all", false, "snap ls: also list snapshots of other namespaces (trash, mirror, group)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: snap %s IMAGE[@SNAP]", verb)
	}
	switch verb {
	case "ls", "list":
		sp, err := c.parseSpec(pos[0], false)
		if err != nil {
			return err
		}
		return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true}, func(img *rbd.Image) error {
			snaps, err := img.Snapshots(ctx)
			if err != nil {
				return err
			}
			sort.Slice(snaps, func(i, j int) bool { return snaps[i].ID < snaps[j].ID })
			type row struct {
				ID        uint64 `json:"id"`
				Name      string `json:"name"`
				Size      uint64 `json:"size"`
				Protected string `json:"protected"`
				Timestamp string `json:"timestamp"`
			}
			rows := []row{}
			for _, s := range snaps {
				if s.Namespace != rbd.SnapNamespaceUser && !*all {
					continue
				}
				ts := "" // as rbd prints a snapshot without a recorded time
				if !s.Timestamp.IsZero() {
					ts = time.Unix(s.Timestamp.Unix(), 0).Format(time.ANSIC)
				}
				rows = append(rows, row{ID: s.ID, Name: s.Name, Size: uint64(s.Size), Protected: strconv.FormatBool(s.Protected),
					Timestamp: ts})
			}
			if *format == "json" {
				return json.NewEncoder(c.stdout).Encode(rows)
			}
			if len(rows) == 0 {
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "SNAPID\tNAME\tSIZE\tPROTECTED\tTIMESTAMP")
			for _, r := range rows {
				prot := ""
				if r.Protected == "true" {
					prot = "yes"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.ID, r.Name, humanBytes(r.Size), prot, r.Timestamp)
			}
			return tw.Flush()
		})
	case "create", "add", "rm", "remove", "protect", "unprotect", "rollback", "revert":
		sp, err := c.parseSpec(pos[0], true)
		if err != nil {
			return err
		}
		snapName := sp.snap
		sp.snap = ""
		return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
			switch verb {
			case "create", "add":
				return img.CreateSnapshot(ctx, snapName)
			case "rm", "remove":
				return img.RemoveSnapshot(ctx, snapName)
			case "protect":
				return img.ProtectSnapshot(ctx, snapName)
			case "unprotect":
				return img.UnprotectSnapshot(ctx, snapName)
			default:
				return img.RollbackSnapshot(ctx, snapName)
			}
		})
	}
	return fmt.Errorf("unknown snap verb %q", verb)
}

func (c *rbdCommand) clone(ctx context.Context, args []string) error {
	fs := newFlagSet("clone", c.stderr)
	cf := addCreateFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("usage: clone PARENT@SNAP CHILD")
	}
	parent, err := c.parseSpec(pos[0], true)
	if err != nil {
		return err
	}
	child, err := c.parseSpec(pos[1], false)
	if err != nil {
		return err
	}
	opts, err := cf.options()
	if err != nil {
		return err
	}
	return c.withPool(ctx, parent, func(pioc *rados.IOContext) error {
		return c.withPool(ctx, child, func(cioc *rados.IOContext) error {
			return rbd.Clone(ctx, pioc, parent.name, parent.snap, cioc, child.name, opts)
		})
	})
}

func (c *rbdCommand) flatten(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: flatten IMAGE")
	}
	sp, err := c.parseSpec(args[0], false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error { return img.Flatten(ctx) })
}

func (c *rbdCommand) imageMeta(ctx context.Context, args []string) error {
	if len(args) < 2 {
		return errors.New("usage: image-meta get|set|remove|list IMAGE [KEY [VALUE]]")
	}
	verb := args[0]
	sp, err := c.parseSpec(args[1], false)
	if err != nil {
		return err
	}
	rest := args[2:]
	ro := verb == "get" || verb == "list" || verb == "ls"
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: ro}, func(img *rbd.Image) error {
		switch {
		case verb == "get" && len(rest) == 1:
			v, err := img.MetadataGet(ctx, rest[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(c.stdout, v)
			return nil
		case verb == "set" && len(rest) == 2:
			return img.MetadataSet(ctx, rest[0], rest[1])
		case (verb == "remove" || verb == "rm") && len(rest) == 1:
			return img.MetadataRemove(ctx, rest[0])
		case verb == "list" || verb == "ls":
			kvs, err := img.MetadataList(ctx)
			if err != nil {
				return err
			}
			for _, k := range slices.Sorted(maps.Keys(kvs)) {
				fmt.Fprintf(c.stdout, "%s\t%s\n", k, kvs[k])
			}
			return nil
		}
		return errors.New("usage: image-meta get|set|remove|list IMAGE [KEY [VALUE]]")
	})
}

// chunk is the unit import, export and bench move.
const ioChunk = 4 << 20

func (c *rbdCommand) importImage(ctx context.Context, args []string) error {
	fs := newFlagSet("import", c.stderr)
	cf := addCreateFlags(fs)
	cache := cacheFlag(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("usage: import [options] PATH|- IMAGE")
	}
	opts, err := cf.options()
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(pos[1], false)
	if err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	var size int64 = -1
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if st.Mode().IsRegular() {
			size = st.Size()
		}
		in = f
	}
	return c.withPool(ctx, sp, func(ioc *rados.IOContext) error {
		initial := size
		if initial < 0 {
			initial = 0
		}
		if err := rbd.Create(ctx, ioc, sp.name, initial, opts); err != nil {
			return err
		}
		img, err := rbd.Open(ctx, ioc, sp.name, rbd.OpenOptions{WriteAround: cliWriteAround(*cache)})
		if err != nil {
			return err
		}
		n, err := copyIn(ctx, img, in, size < 0)
		if err == nil && size < 0 && img.Size() != n {
			err = img.Resize(ctx, n)
		}
		// Close flushes the cache: a write that failed behind it is
		// reported here
		if cerr := img.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// copyIn writes r into img chunk by chunk, several chunks in flight,
// skipping all-zero chunks (the image reads zeros there anyway); grow
// resizes the image as data arrives (input of unknown size).
func copyIn(ctx context.Context, img *rbd.Image, r io.Reader, grow bool) (int64, error) {
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		werr    error
		sem     = make(chan struct{}, 8)
		off     int64
	)
	zero := make([]byte, ioChunk)
	for {
		buf := make([]byte, ioChunk)
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if grow && off+int64(n) > img.Size() {
				wg.Wait()
				if werr != nil {
					return off, werr
				}
				if err := img.Resize(ctx, max(off+int64(n), 2*img.Size())); err != nil {
					return off, err
				}
			}
			if !bytes.Equal(buf[:n], zero[:n]) {
				sem <- struct{}{}
				wg.Add(1)
				go func(p []byte, at int64) {
					defer func() { <-sem; wg.Done() }()
					if _, err := img.WriteAtContext(ctx, p, at); err != nil {
						errOnce.Do(func() { werr = err })
					}
				}(buf[:n], off)
			}
			off += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			wg.Wait()
			return off, rerr
		}
	}
	wg.Wait()
	return off, werr
}

func (c *rbdCommand) exportImage(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: export IMAGE[@SNAP] PATH|-")
	}
	sp, err := c.parseSpec(args[0], false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true, Snapshot: sp.snap}, func(img *rbd.Image) error {
		var out io.Writer = c.stdout
		var file *os.File
		if args[1] != "-" {
			f, err := os.OpenFile(args[1], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			out, file = f, f
		}
		if err := copyOut(ctx, img, out, file); err != nil {
			return err
		}
		if file != nil {
			if err := file.Truncate(img.Size()); err != nil {
				return err
			}
			return file.Close()
		}
		return nil
	})
}

// copyOut reads img in chunks (several in flight) and writes them in
// order; with a file, all-zero chunks become holes.
func copyOut(ctx context.Context, img *rbd.Image, w io.Writer, f *os.File) error {
	size := img.Size()
	type result struct {
		buf []byte
		err error
	}
	const depth = 8
	var chunks []chan result
	start := func(off int64) chan result {
		ch := make(chan result, 1)
		go func() {
			buf := make([]byte, min(ioChunk, size-off))
			_, err := img.ReadAtContext(ctx, buf, off)
			if err == io.EOF {
				err = nil
			}
			ch <- result{buf, err}
		}()
		return ch
	}
	next := int64(0)
	for ; next < size && len(chunks) < depth; next += ioChunk {
		chunks = append(chunks, start(next))
	}
	zero := make([]byte, ioChunk)
	for off := int64(0); len(chunks) > 0; {
		r := <-chunks[0]
		chunks = chunks[1:]
		if r.err != nil {
			return r.err
		}
		if f != nil && bytes.Equal(r.buf, zero[:len(r.buf)]) {
			if _, err := f.Seek(int64(len(r.buf)), io.SeekCurrent); err != nil {
				return err
			}
		} else if _, err := w.Write(r.buf); err != nil {
			return err
		}
		off += int64(len(r.buf))
		if next < size {
			chunks = append(chunks, start(next))
			next += ioChunk
		}
	}
	return nil
}

func (c *rbdCommand) bench(ctx context.Context, args []string) error {
	fs := newFlagSet("bench", c.stderr)
	ioType := fs.String("io-type", "", "write, read or readwrite")
	ioSize := fs.String("io-size", "4K", "I/O size")
	threads := fs.Int("io-threads", 16, "concurrent I/Os")
	total := fs.String("io-total", "1G", "total bytes")
	pattern := fs.String("io-pattern", "seq", "seq or rand")
	cache := cacheFlag(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || (*ioType != "write" && *ioType != "read" && *ioType != "readwrite" && *ioType != "rw") {
		return errors.New("usage: bench --io-type write|read|readwrite [options] IMAGE")
	}
	bs, err := rbdSize(*ioSize, 1)
	if err != nil || bs == 0 {
		return fmt.Errorf("--io-size: bad size %q", *ioSize)
	}
	tot, err := rbdSize(*total, 1)
	if err != nil {
		return err
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	opts := rbd.OpenOptions{ReadOnly: *ioType == "read"}
	if !opts.ReadOnly {
		opts.WriteAround = cliWriteAround(*cache)
	}
	return c.withImage(ctx, sp, opts, func(img *rbd.Image) error {
		size := img.Size()
		if size < bs {
			return fmt.Errorf("image smaller than one I/O")
		}
		nOps := tot / bs
		var next, done, bytesDone atomic.Int64
		var wg sync.WaitGroup
		var firstErr atomic.Value
		// as rbd bench: every write sends one random buffer (made only
		// when the run writes), made before the clock starts and frozen
		// (librbd checksums rbd bench's buffer once and never copies it;
		// rados.Frozen does the same here); reads get a buffer per
		// thread, also made (and touched, so that the kernel backs them)
		// before it: on a VM where the first touch of a page costs 12-20
		// µs, 16 fresh 4 MiB buffers cost 0.25 s inside the clock (by
		// hand, 4M reads: 338-401 ops/s without, 398-417 with)
		seed := uint64(time.Now().UnixNano())
		var frozen *rados.Frozen // nil when nothing is written
		if *ioType != "read" {
			wbuf := make([]byte, bs)
			fillRandom(wbuf, rand.New(rand.NewPCG(seed, 1)))
			frozen = rados.Freeze(wbuf)
		}
		nThreads := max(*threads, 1)
		rbufs := make([][]byte, nThreads) // nil when nothing is read
		if *ioType != "write" {
			for t := range rbufs {
				rbufs[t] = make([]byte, bs)
				touchPages(rbufs[t])
			}
		}
		startT := time.Now()
		for t := 0; t < nThreads; t++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rbuf := rbufs[t]
				for {
					i := next.Add(1) - 1
					if i >= nOps || ctx.Err() != nil {
						return
					}
					// I/O i draws from a hash of the run's seed and i:
					// each run picks fresh blocks, as rbd bench does (it
					// seeds rand() with the time), and the pick costs no
					// lock between the threads
					h := benchHash(seed + uint64(i))
					var off int64
					if *pattern == "rand" {
						off = int64(h%uint64(size/bs)) * bs
					} else {
						off = (i * bs) % (size / bs * bs)
					}
					write := *ioType == "write" || (*ioType != "read" && h>>63 == 0)
					var err error
					if write {
						_, err = img.WriteFrozenAt(ctx, frozen, off)
					} else {
						_, err = img.ReadAtContext(ctx, rbuf, off)
					}
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					done.Add(1)
					bytesDone.Add(bs)
				}
			}()
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
		// as rbd bench: the run ends when the writes are durable
		if err := img.Flush(ctx); err != nil {
			return err
		}
		elapsed := time.Since(startT)
		secs := elapsed.Seconds()
		fmt.Fprintf(c.stdout, "bench  type %s io_size %d io_threads %d bytes %d pattern %s\n",
			*ioType, bs, *threads, bytesDone.Load(), *pattern)
		fmt.Fprintf(c.stdout, "elapsed: %.2f  ops: %d  ops/sec: %.2f  bytes/sec: %s/s\n",
			secs, done.Load(), float64(done.Load())/secs, humanBytes(uint64(float64(bytesDone.Load())/secs)))
		return nil
	})
}

// benchHash is SplitMix64's output function: I/O i of a bench run draws
// its offset (and, reading and writing, its direction) from
// benchHash(seed+i).
func benchHash(i uint64) uint64 {
	z := i*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// fillRandom fills p from rng, eight bytes at a time.
func fillRandom(p []byte, rng *rand.Rand) {
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, rng.Uint64())
		p = p[8:]
	}
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
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

func (c *rbdCommand) status(ctx context.Context, args []string) error {
	fs := newFlagSet("status", c.stderr)
	format := fs.String("format", "plain", "plain or json")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: status IMAGE")
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true}, func(img *rbd.Image) error {
		ws, err := img.Watchers(ctx)
		if err != nil {
			return err
		}
		// this command's own watch is not a user of the image
		own := ws[:0]
		for _, w := range ws {
			if w.Client != fmt.Sprintf("client.%d", c.radosConn.InstanceID()) {
				own = append(own, w)
			}
		}
		if *format == "json" {
			type wj struct {
				Address string `json:"address"`
				Client  string `json:"client"`
				Cookie  uint64 `json:"cookie"`
			}
			out := struct {
				Watchers []wj `json:"watchers"`
			}{Watchers: []wj{}}
			for _, w := range own {
				out.Watchers = append(out.Watchers, wj{w.Address, w.Client, w.Cookie})
			}
			return json.NewEncoder(c.stdout).Encode(out)
		}
		if len(own) == 0 {
			fmt.Fprintln(c.stdout, "Watchers: none")
			return nil
		}
		fmt.Fprintln(c.stdout, "Watchers:")
		for _, w := range own {
			fmt.Fprintf(c.stdout, "\twatcher=%s %s cookie=%d\n", w.Address, w.Client, w.Cookie)
		}
		return nil
	})
}

func (c *rbdCommand) lockList(ctx context.Context, args []string) error {
	if len(args) < 1 || (args[0] != "ls" && args[0] != "list") {
		return errors.New("usage: lock ls IMAGE")
	}
	fs := newFlagSet("lock ls", c.stderr)
	format := fs.String("format", "plain", "plain or json")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: lock ls IMAGE")
	}
	sp, err := c.parseSpec(pos[0], false)
	if err != nil {
		return err
	}
	return c.withImage(ctx, sp, rbd.OpenOptions{ReadOnly: true}, func(img *rbd.Image) error {
		owners, err := img.LockOwners(ctx)
		if err != nil {
			return err
		}
		if *format == "json" {
			type lj struct {
				ID      string `json:"id"`
				Locker  string `json:"locker"`
				Address string `json:"address"`
			}
			out := []lj{}
			for _, o := range owners {
				out = append(out, lj{o.Cookie, o.Client, o.Address})
			}
			return json.NewEncoder(c.stdout).Encode(out)
		}
		if len(owners) == 0 {
			return nil
		}
		fmt.Fprintf(c.stdout, "There is 1 exclusive lock on this image.\n")
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 1, ' ', 0)
		fmt.Fprintln(tw, "Locker\tID\tAddress")
		for _, o := range owners {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Client, o.Cookie, o.Address)
		}
		return tw.Flush()
	})
}

// touchPages writes to every page of p, so that the kernel backs it now.
func touchPages(p []byte) {
	for i := 0; i < len(p); i += 4096 {
		p[i] = 0
	}
}
