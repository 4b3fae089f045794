package csi

// Volume group snapshot IDs. A VolumeGroupSnapshot is an RBD group that
// carries one group snapshot of the same name (groupsnapshots.go), so
// its ID locates the group, in the form of the volume ID (volumeid.go):
//
//	group snapshot ID = "g1-" LEN "-" clusterID "-" POOL "-" LEN "-" namespace "-" groupname
//
// With a 36-byte cluster ID and the default 40-byte group names it is 88
// bytes. The member snapshots keep ordinary snapshot IDs whose snapshot
// name is the member's name in RBD's group snapshot namespace.

import (
	"fmt"
	"strconv"
	"strings"
)

// GroupSnapshotID locates the RBD group behind a VolumeGroupSnapshot.
type GroupSnapshotID struct {
	ClusterID string
	Pool      int64
	Namespace string
	Group     string // group name, which is also its group snapshot's
}

// String encodes the ID without checking it; use Encode to check.
func (g GroupSnapshotID) String() string {
	var b strings.Builder
	b.WriteString("g1-")
	writeField(&b, g.ClusterID)
	b.WriteString(strconv.FormatInt(g.Pool, 16))
	b.WriteByte('-')
	writeField(&b, g.Namespace)
	b.WriteString(g.Group)
	return b.String()
}

// Encode checks the fields and returns the ID's string form.
func (g GroupSnapshotID) Encode() (string, error) {
	if err := g.check(); err != nil {
		return "", err
	}
	s := g.String()
	if len(s) > MaxIDLength {
		return "", fmt.Errorf("group snapshot %w: %d bytes for cluster ID %q (%d bytes), namespace %q (%d bytes) and group %q (%d bytes); shorten the clusterID, radosNamespace or snapshotNamePrefix",
			ErrIDTooLong, len(s), g.ClusterID, len(g.ClusterID), g.Namespace, len(g.Namespace), g.Group, len(g.Group))
	}
	return s, nil
}

func (g GroupSnapshotID) check() error {
	if err := checkField("cluster ID", g.ClusterID, false); err != nil {
		return err
	}
	if g.Pool < 0 {
		return fmt.Errorf("pool ID %d is negative", g.Pool)
	}
	if err := checkField("namespace", g.Namespace, true); err != nil {
		return err
	}
	return checkName("group name", g.Group)
}

func (g GroupSnapshotID) ref() GroupRef {
	return GroupRef{Pool: g.Pool, Namespace: g.Namespace, Name: g.Group}
}

// ParseGroupSnapshotID decodes a group snapshot ID; like the others,
// exactly one string encodes each ID.
func ParseGroupSnapshotID(s string) (GroupSnapshotID, error) {
	var g GroupSnapshotID
	p := idParser{s: s, what: "group snapshot ID"}
	p.literal("g1-")
	g.ClusterID = p.field()
	g.Pool = p.pool()
	g.Namespace = p.field()
	g.Group = p.rest()
	if p.err != nil {
		return GroupSnapshotID{}, p.err
	}
	if len(s) > MaxIDLength {
		return GroupSnapshotID{}, fmt.Errorf("group snapshot %w", ErrIDTooLong)
	}
	if err := g.check(); err != nil {
		return GroupSnapshotID{}, fmt.Errorf("group snapshot ID %q: %w", s, err)
	}
	return g, nil
}
