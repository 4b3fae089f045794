package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/purerbd/purerbd/rados"
)

// listsnaps: an object's clones, the snapshots each serves, its size and
// the bytes it shares with the next newer clone, as the rados tool
// prints them.

// listsnapsObject is `rados listsnaps --format json`, its keys in the
// rados tool's order.
type listsnapsObject struct {
	Name   string           `json:"name"`
	Clones []listsnapsClone `json:"clones"`
}

// listsnapsClone is one clone; ID is a number, or "head" for the head.
type listsnapsClone struct {
	ID        any             `json:"id"`
	Snapshots []listsnapsSnap `json:"snapshots"`
	Size      uint64          `json:"size"`
	// Overlaps is nil for the head, which has none, and a list (empty
	// or not) for a clone.
	Overlaps *[]listsnapsOverlap `json:"overlaps,omitempty"`
}

type listsnapsSnap struct {
	ID   uint64 `json:"id"`
	Name string `json:"name,omitempty"`
}

type listsnapsOverlap struct {
	Start  uint64 `json:"start"`
	Length uint64 `json:"length"`
}

// listsnaps prints oid's clones: in JSON with the pool snapshots'
// names, or as the rados tool's table, "cloneid snaps size overlap"
// separated by tabs, with the names ("NAME(ID)") under --pretty-format.
// The head has no overlap column.
func (c *radosCommand) listsnaps(ctx context.Context, oid string) error {
	r := rados.NewReadOp()
	st := r.ListSnaps()
	err := c.io.OperateRead(ctx, oid, r)
	if err == nil {
		err = st.Err
	}
	if err != nil {
		return fmt.Errorf("error listing snap shots %s/%s: %s", c.pool, oid, errnoText(err))
	}
	names := map[uint64]string{}
	if c.out.json() || c.out.pretty {
		// names of snapshots taken just before this run
		if err := c.conn.WaitForLatestOSDMap(ctx); err != nil {
			return fmt.Errorf("error listing snapshots of pool %s: %s", c.pool, errnoText(err))
		}
		snaps, err := c.io.ListSnaps()
		if err != nil {
			return fmt.Errorf("error listing snapshots of pool %s: %s", c.pool, errnoText(err))
		}
		for _, s := range snaps {
			names[s.ID] = s.Name
		}
	}
	if c.out.json() {
		return c.writeJSON(listsnapsJSON(oid, st.SnapSet, names), false)
	}
	w := bufio.NewWriter(c.stdout)
	fmt.Fprintf(w, "%s:\ncloneid\tsnaps\tsize\toverlap\n", oid)
	for _, cl := range st.SnapSet.Clones {
		id := "head"
		if cl.CloneID != rados.SnapHead {
			id = strconv.FormatUint(cl.CloneID, 10)
		}
		snaps := make([]string, len(cl.Snaps))
		for i, s := range cl.Snaps {
			snaps[i] = strconv.FormatUint(s, 10)
			if n, ok := names[s]; ok {
				snaps[i] = fmt.Sprintf("%s(%d)", n, s)
			}
		}
		if len(snaps) == 0 {
			snaps = []string{"-"}
		}
		fmt.Fprintf(w, "%s\t%s\t%d", id, strings.Join(snaps, ","), cl.Size)
		if cl.CloneID == rados.SnapHead {
			// the rados tool ends the head's line with the table
			continue
		}
		ov := make([]string, len(cl.Overlap))
		for i, o := range cl.Overlap {
			ov[i] = fmt.Sprintf("%d~%d", o.Offset, o.Length)
		}
		fmt.Fprintf(w, "\t[%s]\n", strings.Join(ov, ","))
	}
	fmt.Fprintln(w)
	return w.Flush()
}

// listsnapsJSON shapes a snap set as `rados listsnaps --format json`
// does; a clone's snapshot has its name where the pool still has it.
func listsnapsJSON(oid string, ss rados.SnapSet, names map[uint64]string) listsnapsObject {
	out := listsnapsObject{Name: oid, Clones: []listsnapsClone{}}
	for _, cl := range ss.Clones {
		j := listsnapsClone{ID: cl.CloneID, Snapshots: []listsnapsSnap{}, Size: cl.Size}
		if cl.CloneID == rados.SnapHead {
			j.ID = "head"
		} else {
			ov := []listsnapsOverlap{}
			for _, o := range cl.Overlap {
				ov = append(ov, listsnapsOverlap{Start: o.Offset, Length: o.Length})
			}
			j.Overlaps = &ov
		}
		for _, s := range cl.Snaps {
			j.Snapshots = append(j.Snapshots, listsnapsSnap{ID: s, Name: names[s]})
		}
		out.Clones = append(out.Clones, j)
	}
	return out
}
