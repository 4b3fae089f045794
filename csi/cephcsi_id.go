package csi

// ceph-csi's volume and snapshot handles, so that PersistentVolumes and
// VolumeSnapshotContents made by ceph-csi's RBD driver keep working
// after purerbd takes over its driver name.
//
// ceph-csi composes both handles the same way (ceph/ceph-csi
// internal/util/volid.go, CSIIdentifier.ComposeCSIID, encoding version 1):
//
//	VVVV "-" LLLL "-" clusterID "-" PPPPPPPPPPPPPPPP "-" uuid
//
// VVVV is the encoding version (0001), LLLL the cluster ID's length and
// P the pool ID, all big-endian hex as encoding/hex writes it (lower
// case, fixed width); uuid is the 36-character UUID of the journal
// entry (the "reserved ID", google/uuid's canonical lower-case form).
// The pool is the image pool (internal/rbd/rbd_journal.go, reserveVol
// and reserveSnap pass imagePoolID to GenerateVolID); the RADOS
// namespace is not in the handle: ceph-csi takes it from the cluster's
// "radosNamespace" in config.json for the journal and the image alike
// (util.GetRBDRadosNamespace), and so does purerbd. A handle is at most
// 128 bytes, so the cluster ID at most 64.
//
// ceph-csi's own decoder (DecomposeCSIID) checks little: it does not
// look at the separators nor at the UUID's form. purerbd accepts exactly
// the strings ComposeCSIID can produce, so that String(Parse(s)) == s,
// and nothing else: a handle that is not one is NOT_FOUND like any
// volume ID that cannot exist.

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

const (
	cephCSIVersion  = 1
	cephCSIUUIDLen  = 36
	cephCSIFixedLen = 4 + 1 + 4 + 1 + 1 + 16 + 1 + cephCSIUUIDLen // 64, with an empty cluster ID
)

// CephCSIID is a ceph-csi volume or snapshot handle (CSIIdentifier).
type CephCSIID struct {
	ClusterID string
	// Pool is the ID of the pool holding the image and its journal
	// entry (LocationID).
	Pool int64
	// UUID names the journal entry: csi.volume.UUID or csi.snap.UUID.
	UUID string
}

// ErrNotCephCSIID is wrapped by ParseCephCSIID's errors.
var ErrNotCephCSIID = errors.New("not a ceph-csi handle")

// String composes the handle as ceph-csi does; use Encode to check it.
func (c CephCSIID) String() string {
	var b [8]byte
	binary.BigEndian.PutUint16(b[:2], cephCSIVersion)
	ver := hex.EncodeToString(b[:2])
	binary.BigEndian.PutUint16(b[:2], uint16(len(c.ClusterID)))
	l := hex.EncodeToString(b[:2])
	binary.BigEndian.PutUint64(b[:], uint64(c.Pool))
	return ver + "-" + l + "-" + c.ClusterID + "-" + hex.EncodeToString(b[:]) + "-" + c.UUID
}

// Encode checks the fields and composes the handle.
func (c CephCSIID) Encode() (string, error) {
	if err := c.check(); err != nil {
		return "", err
	}
	return c.String(), nil
}

func (c CephCSIID) check() error {
	if err := checkField("cluster ID", c.ClusterID, false); err != nil {
		return err
	}
	if cephCSIFixedLen+len(c.ClusterID) > MaxIDLength {
		return fmt.Errorf("cluster ID %q is longer than %d bytes", c.ClusterID, MaxIDLength-cephCSIFixedLen)
	}
	if c.Pool < 0 {
		return fmt.Errorf("pool ID %d is negative", c.Pool)
	}
	if !isCanonicalUUID(c.UUID) {
		return fmt.Errorf("%q is not a lower-case UUID", c.UUID)
	}
	return nil
}

// ParseCephCSIID decodes a ceph-csi handle.
func ParseCephCSIID(s string) (CephCSIID, error) {
	fail := func(why string) (CephCSIID, error) {
		return CephCSIID{}, fmt.Errorf("%w: %q: %s", ErrNotCephCSIID, s, why)
	}
	if len(s) < cephCSIFixedLen || len(s) > MaxIDLength {
		return fail("wrong length")
	}
	if s[:5] != "0001-" {
		return fail("does not start with encoding version 0001")
	}
	n, ok := fixedHex(s[5:9])
	if !ok || s[9] != '-' {
		return fail("no cluster ID length")
	}
	rest := s[10:]
	if uint64(len(rest)) != n+1+16+1+cephCSIUUIDLen {
		return fail("cluster ID length does not match")
	}
	c := CephCSIID{ClusterID: rest[:n]}
	rest = rest[n:]
	if rest[0] != '-' || rest[17] != '-' {
		return fail("fields are not separated by '-'")
	}
	pool, ok := fixedHex(rest[1:17])
	if !ok {
		return fail("pool ID is not 16 lower-case hex digits")
	}
	c.Pool = int64(pool)
	c.UUID = rest[18:]
	if err := c.check(); err != nil {
		return fail(err.Error())
	}
	return c, nil
}

// fixedHex decodes lower-case hex digits, as encoding/hex writes them.
func fixedHex(h string) (uint64, bool) {
	for i := 0; i < len(h); i++ {
		if !(h[i] >= '0' && h[i] <= '9' || h[i] >= 'a' && h[i] <= 'f') {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(h, 16, 64)
	return n, err == nil
}

// isCanonicalUUID reports whether u is a UUID as google/uuid's String
// writes it: 8-4-4-4-12 lower-case hex digits.
func isCanonicalUUID(u string) bool {
	if len(u) != cephCSIUUIDLen {
		return false
	}
	for i := 0; i < len(u); i++ {
		switch i {
		case 8, 13, 18, 23:
			if u[i] != '-' {
				return false
			}
		default:
			if !(u[i] >= '0' && u[i] <= '9' || u[i] >= 'a' && u[i] <= 'f') {
				return false
			}
		}
	}
	return true
}

// splitCephCSIName splits an image name ceph-csi made, PREFIX + UUID
// (journal.GetNameForUUID), into its prefix and UUID.
func splitCephCSIName(name string) (prefix, uuid string, ok bool) {
	if len(name) <= cephCSIUUIDLen {
		return "", "", false
	}
	prefix, uuid = name[:len(name)-cephCSIUUIDLen], name[len(name)-cephCSIUUIDLen:]
	return prefix, uuid, isCanonicalUUID(uuid)
}
