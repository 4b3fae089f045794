package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// osdmapCommand is the osdmap group: test-map-object and
// test-map-pgs-dump, osdmaptool's tests of the same names.
func osdmapCommand() *cli.Command {
	group := &cli.Command{
		Name:    "osdmap",
		Summary: "map objects and PGs with an OSDMap (like osdmaptool --test-map-*)",
		Help: `Maps objects and placement groups with an OSDMap file (as written by
'ceph osd getmap' or osdmaptool) and prints what 'osdmaptool MAP
--test-map-object NAME --pool ID' and 'osdmaptool MAP --test-map-pgs-dump'
print.`,
	}
	verb := func(name, summary, args string, n int, test func(ctx context.Context, m *osdmap.OSDMap, inv *cli.Invocation, pool int64, w io.Writer) error) *cli.Command {
		pool := int64(-1)
		c := &cli.Command{Name: name, Summary: summary, Args: args, MinArgs: n, MaxArgs: n,
			Run: func(ctx context.Context, inv *cli.Invocation) error {
				file := inv.Args[0]
				raw, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				m, err := osdmap.Decode(raw)
				if err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				bw := bufio.NewWriter(inv.Stdout)
				err = test(ctx, m, inv, pool, bw)
				if ferr := bw.Flush(); err == nil {
					err = ferr
				}
				return err
			}}
		c.Func("--pool ID", "only the pool with this id", func(v []string) error {
			p, err := strconv.ParseInt(v[0], 10, 64)
			if err != nil {
				return errors.New("want a pool id")
			}
			pool = p
			return nil
		})
		return c
	}
	return group.Add(
		verb("test-map-object", "map an object as osdmaptool --test-map-object does", "OSDMAP NAME", 2,
			func(_ context.Context, m *osdmap.OSDMap, inv *cli.Invocation, pool int64, w io.Writer) error {
				return testMapObject(m, inv.Args[1], pool, w)
			}),
		verb("test-map-pgs-dump", "map every placement group as osdmaptool --test-map-pgs-dump does", "OSDMAP", 1,
			func(ctx context.Context, m *osdmap.OSDMap, _ *cli.Invocation, pool int64, w io.Writer) error {
				return testMapPGsDump(ctx, m, pool, w)
			}),
	)
}

func testMapObject(m *osdmap.OSDMap, name string, pool int64, w io.Writer) error {
	if pool == -1 {
		fmt.Fprintln(w, "purerbd osdmap: assuming pool 1 (use --pool to override)")
		pool = 1
	}
	if m.Pool(pool) == nil {
		return fmt.Errorf("there is no pool %d", pool)
	}
	pg, mp, err := m.MapObject(name, osdmap.Locator{Pool: pool})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, " object '%s' -> %s -> %s\n", name, pg, appendIntList(nil, mp.Acting))
	return err
}

// testMapPGsDump maps every placement group of every (or one) pool and
// prints osdmaptool's per-PG lines and its summary.
func testMapPGsDump(ctx context.Context, m *osdmap.OSDMap, onlyPool int64, w io.Writer) error {
	if onlyPool != -1 && m.Pool(onlyPool) == nil {
		return fmt.Errorf("there is no pool %d", onlyPool)
	}
	n := int(m.MaxOSD)
	count := make([]int, n)
	firstCount := make([]int, n)
	primaryCount := make([]int, n)
	sizes := make([]int, 30)
	maxSize := 0
	ids := make([]int64, 0, len(m.Pools))
	for id := range m.Pools {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var line []byte
	for _, id := range ids {
		if onlyPool != -1 && id != onlyPool {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p := m.Pools[id]
		fmt.Fprintf(w, "pool %d pg_num %d\n", id, p.PGNum)
		for ps := uint32(0); ps < p.PGNum; ps++ {
			pg := denc.PG{Pool: uint64(id), Seed: ps}
			mp := m.PGToUpActing(pg)
			osds := mp.Acting
			if len(osds) < len(sizes) {
				sizes[len(osds)]++
			}
			maxSize = max(maxSize, len(osds))
			line = append(line[:0], pg.String()...)
			line = append(line, '\t')
			line = appendIntList(line, osds)
			line = append(line, '\t')
			line = strconv.AppendInt(line, int64(mp.ActingPrimary), 10)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return err
			}
			// osdmaptool indexes its counters with every entry, holes
			// included (undefined behaviour for erasure-coded holes); only
			// real OSDs are counted here.
			for _, o := range osds {
				if o >= 0 && int(o) < n {
					count[o]++
				}
			}
			if len(osds) > 0 && osds[0] >= 0 && int(osds[0]) < n {
				firstCount[osds[0]]++
			}
			if mp.ActingPrimary >= 0 && int(mp.ActingPrimary) < n {
				primaryCount[mp.ActingPrimary]++
			}
		}
	}

	var total uint64
	in := 0
	minOSD, maxOSD := -1, -1
	fmt.Fprint(w, "#osd\tcount\tfirst\tprimary\tc wt\twt\n")
	counted := func(i int) bool {
		if !m.IsIn(int32(i)) {
			return false
		}
		cw, ok := m.Crush.ItemWeight(int32(i))
		return ok && cw > 0
	}
	for i := 0; i < n; i++ {
		if !counted(i) {
			continue
		}
		in++
		cw, _ := m.Crush.ItemWeight(int32(i))
		fmt.Fprintf(w, "osd.%d\t%d\t%d\t%d\t%s\t%s\n", i, count[i], firstCount[i], primaryCount[i],
			cppFloat(float64(float32(cw)/float32(0x10000))),
			cppFloat(float64(float32(m.Weight(int32(i)))/float32(osdmap.WeightIn))))
		total += uint64(count[i])
		if count[i] != 0 && (minOSD < 0 || count[i] < count[minOSD]) {
			minOSD = i
		}
		if count[i] != 0 && (maxOSD < 0 || count[i] > count[maxOSD]) {
			maxOSD = i
		}
	}
	var avg uint64
	if in != 0 {
		avg = total / uint64(in)
	}
	var dev float64
	for i := 0; i < n; i++ {
		if !counted(i) {
			continue
		}
		// osdmaptool computes this in unsigned 64-bit arithmetic.
		diff := avg - uint64(count[i])
		dev += float64(diff * diff)
	}
	dev /= float64(in)
	dev = math.Sqrt(dev)
	edev := math.Sqrt(float64(total) / float64(in) * (1.0 - (1.0 / float64(in))))
	fmt.Fprintf(w, " in %d\n", in)
	fmt.Fprintf(w, " avg %d stddev %s (%sx) (expected %s %sx))\n", avg, cppFloat(dev),
		cppFloat(dev/float64(avg)), cppFloat(edev), cppFloat(edev/float64(avg)))
	if minOSD >= 0 {
		fmt.Fprintf(w, " min osd.%d %d\n", minOSD, count[minOSD])
	}
	if maxOSD >= 0 {
		fmt.Fprintf(w, " max osd.%d %d\n", maxOSD, count[maxOSD])
	}
	for i := 0; i <= maxSize && i < len(sizes); i++ {
		if sizes[i] != 0 {
			fmt.Fprintf(w, "size %d\t%d\n", i, sizes[i])
		}
	}
	return nil
}

// cppFloat formats a number as C++'s default ostream formatting does
// (printf %g, 6 significant digits; glibc prints the NaN that 0/0 gives
// on x86 as "-nan").
func cppFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		// Every NaN here comes from 0/0, which x86 makes negative.
		return "-nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}
