package main

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/purerbd/purerbd/rados"
)

// The rados tool's pool verbs: lspools and df.

// lspools prints the pool names in the order of their ids, as librados
// lists them; the rados tool has no JSON form of it.
func (c *radosCommand) lspools(ctx context.Context) error {
	if err := c.conn.WaitForLatestOSDMap(ctx); err != nil {
		return fmt.Errorf("error listing pools: %s", errnoText(err))
	}
	w := bufio.NewWriter(c.stdout)
	defer w.Flush()
	for _, p := range poolsByID(c.conn) {
		fmt.Fprintln(w, p.name)
	}
	return nil
}

type namedPool struct {
	id   int64
	name string
}

// poolsByID returns the pools of the connection's OSD map, by id.
func poolsByID(conn *rados.Conn) []namedPool {
	var out []namedPool
	for id, name := range conn.OSDMap().PoolNames {
		out = append(out, namedPool{id, name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// dfPool is one pool of `rados df --format json`, its keys in the rados
// tool's order.
type dfPool struct {
	Name                    string `json:"name"`
	ID                      *int64 `json:"id,omitempty"`
	SizeBytes               uint64 `json:"size_bytes"`
	SizeKB                  uint64 `json:"size_kb"`
	NumObjects              uint64 `json:"num_objects"`
	NumObjectClones         uint64 `json:"num_object_clones"`
	NumObjectCopies         uint64 `json:"num_object_copies"`
	NumObjectsMissingOnPrim uint64 `json:"num_objects_missing_on_primary"`
	NumObjectsUnfound       uint64 `json:"num_objects_unfound"`
	NumObjectsDegraded      uint64 `json:"num_objects_degraded"`
	ReadOps                 uint64 `json:"read_ops"`
	ReadBytes               uint64 `json:"read_bytes"`
	WriteOps                uint64 `json:"write_ops"`
	WriteBytes              uint64 `json:"write_bytes"`
	CompressBytesUsed       uint64 `json:"compress_bytes_used"`
	CompressUnderBytes      uint64 `json:"compress_under_bytes"`
}

// dfStats is `rados df --format json`.
type dfStats struct {
	Pools        []dfPool `json:"pools"`
	TotalObjects uint64   `json:"total_objects"`
	TotalUsed    uint64   `json:"total_used"` // KiB, as the rados tool prints it
	TotalAvail   uint64   `json:"total_avail"`
	TotalSpace   uint64   `json:"total_space"`
}

// df prints each pool's usage (only -p's pool when given), sorted by
// name, and the cluster's totals. Pools the manager has not reported yet
// are left out, as the rados tool leaves them out.
func (c *radosCommand) df(ctx context.Context) error {
	var names []string
	if c.pool != "" {
		names = []string{c.pool}
	} else {
		if err := c.conn.WaitForLatestOSDMap(ctx); err != nil {
			return fmt.Errorf("error listing pools: %s", errnoText(err))
		}
		for _, p := range poolsByID(c.conn) {
			names = append(names, p.name)
		}
	}
	stats, err := c.conn.PoolStats(ctx, names)
	if err != nil {
		return fmt.Errorf("error fetching pool stats: %s", errnoText(err))
	}
	names = names[:0]
	for name := range stats {
		names = append(names, name)
	}
	sort.Strings(names)
	total, err := c.conn.ClusterStat(ctx)
	if err != nil {
		return fmt.Errorf("error getting total cluster usage: %s", errnoText(err))
	}
	if c.out.json() {
		out := dfStats{Pools: []dfPool{}, TotalObjects: total.Objects, TotalUsed: total.KBUsed,
			TotalAvail: total.KBAvail, TotalSpace: total.KB}
		for _, name := range names {
			s := stats[name]
			p := dfPool{Name: name, SizeBytes: s.Bytes, SizeKB: s.KB(), NumObjects: s.Objects,
				NumObjectClones: s.ObjectClones, NumObjectCopies: s.ObjectCopies,
				NumObjectsMissingOnPrim: s.ObjectsMissingOnPrimary, NumObjectsUnfound: s.ObjectsUnfound,
				NumObjectsDegraded: s.ObjectsDegraded, ReadOps: s.ReadOps, ReadBytes: s.ReadKB * 1024,
				WriteOps: s.WriteOps, WriteBytes: s.WriteKB * 1024,
				CompressBytesUsed: s.CompressedBytesAllocated, CompressUnderBytes: s.CompressedBytesOriginal}
			if id, err := c.conn.LookupPool(ctx, name); err == nil {
				p.ID = &id
			}
			out.Pools = append(out.Pools, p)
		}
		return c.writeJSON(out, false)
	}
	t := &textTable{
		headers: []string{"POOL_NAME", "USED", "OBJECTS", "CLONES", "COPIES", "MISSING_ON_PRIMARY", "UNFOUND",
			"DEGRADED", "RD_OPS", "RD", "WR_OPS", "WR", "USED COMPR", "UNDER COMPR"},
		right:        []bool{false, true, true, true, true, true, true, true, true, true, true, true, true, true},
		alignHeaders: true,
	}
	n := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for _, name := range names {
		s := stats[name]
		t.add(name, humanBytes(s.Bytes), n(s.Objects), n(s.ObjectClones), n(s.ObjectCopies),
			n(s.ObjectsMissingOnPrimary), n(s.ObjectsUnfound), n(s.ObjectsDegraded),
			n(s.ReadOps), humanBytes(s.ReadKB<<10), n(s.WriteOps), humanBytes(s.WriteKB<<10),
			humanBytes(s.CompressedBytesAllocated), humanBytes(s.CompressedBytesOriginal))
	}
	if err := t.write(c.stdout); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "\ntotal_objects    %d\ntotal_used       %s\ntotal_avail      %s\ntotal_space      %s\n",
		total.Objects, humanBytes(total.KBUsed<<10), humanBytes(total.KBAvail<<10), humanBytes(total.KB<<10))
	return err
}
