package rados

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestListSnaps reads an object's clones after writes under two
// self-managed snapshots and compares them with `rados listsnaps`.
func TestListSnaps(t *testing.T) {
	conn := connectTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := conn.CreatePool(ctx, "listsnaps-pool"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.DeletePool(context.Background(), "listsnaps-pool") }()
	io, err := conn.IOContext(ctx, "listsnaps-pool", "")
	if err != nil {
		t.Fatal(err)
	}
	listSnaps := func(oid string) (SnapSet, error) {
		r := NewReadOp()
		s := r.ListSnaps()
		if err := io.OperateRead(ctx, oid, r); err != nil {
			return SnapSet{}, err
		}
		return s.SnapSet, s.Err
	}
	if _, err := listSnaps("missing"); !isNotFound(err) {
		t.Fatalf("list-snaps of a missing object: %v", err)
	}
	if err := io.WriteFull(ctx, "o", make([]byte, 8192)); err != nil {
		t.Fatal(err)
	}
	s1, err := io.SelfManagedSnapCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := io.WithSnapContext(s1, []uint64{s1}).Write(ctx, "o", []byte("abc"), 4096); err != nil {
		t.Fatal(err)
	}
	s2, err := io.SelfManagedSnapCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := io.WithSnapContext(s2, []uint64{s2, s1}).Write(ctx, "o", []byte("abc"), 16384); err != nil {
		t.Fatal(err)
	}
	got, err := listSnaps("o")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Clones) != 3 || got.Clones[2].CloneID != SnapHead || got.Seq != s2 {
		t.Fatalf("snap set %+v", got)
	}

	out, err := cluster.Rados(ctx, "-p", "listsnaps-pool", "listsnaps", "o", "--format", "json")
	if err != nil {
		t.Fatalf("rados listsnaps: %s %v", out, err)
	}
	var theirs struct {
		Clones []struct {
			ID        json.RawMessage `json:"id"`
			Snapshots []struct {
				ID uint64 `json:"id"`
			} `json:"snapshots"`
			Overlaps []struct {
				Start  uint64 `json:"start"`
				Length uint64 `json:"length"`
			} `json:"overlaps"`
			Size uint64 `json:"size"`
		} `json:"clones"`
	}
	if err := json.Unmarshal(out, &theirs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(theirs.Clones) != len(got.Clones) {
		t.Fatalf("rados listsnaps %s; purerbd %+v", out, got)
	}
	for i, c := range got.Clones {
		th := theirs.Clones[i]
		id := fmt.Sprint(c.CloneID)
		if c.CloneID == SnapHead {
			id = `"head"`
		}
		var snaps []uint64
		for _, s := range th.Snapshots {
			snaps = append(snaps, s.ID)
		}
		var overlap []Extent
		for _, o := range th.Overlaps {
			overlap = append(overlap, Extent{Offset: o.Start, Length: o.Length})
		}
		if string(th.ID) != id || th.Size != c.Size || fmt.Sprint(snaps) != fmt.Sprint(snapsOrNil(c.Snaps)) ||
			fmt.Sprint(overlap) != fmt.Sprint(extentsOrNil(c.Overlap)) {
			t.Errorf("clone %d: purerbd %+v, rados %s", i, c, out)
		}
	}
}

func snapsOrNil(s []uint64) []uint64 {
	if len(s) == 0 {
		return nil
	}
	return s
}

func extentsOrNil(e []Extent) []Extent {
	if len(e) == 0 {
		return nil
	}
	return e
}
