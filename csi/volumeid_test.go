package csi

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/internal/alloctest"
)

const fsid = "b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07"

func TestVolumeIDRoundTrip(t *testing.T) {
	for _, v := range []VolumeID{
		{ClusterID: fsid, Pool: 2, Image: volumeImageName(defaultVolumePrefix, "pvc-1")},
		{ClusterID: "c", Pool: 0, Namespace: "ns-with-dashes", Image: "img-with-dashes"},
		{ClusterID: "a-b-c", Pool: 0x7fffffff, Namespace: "x", Image: "i"},
		{ClusterID: "-", Pool: 1<<50 + 3, Namespace: "-", Image: "-"},
	} {
		s, err := v.Encode()
		require.NoError(t, err)
		got, err := ParseVolumeID(s)
		require.NoError(t, err, s)
		assert.Equal(t, v, got)
		assert.Equal(t, s, got.String())
		_, err = ParseSnapshotID(s)
		assert.Error(t, err, "a volume ID is not a snapshot ID")
	}
}

func TestVolumeIDExample(t *testing.T) {
	v := VolumeID{ClusterID: fsid, Pool: 2, Image: "csi-vol-5d41402abc4b2a76b9719d911017c592"}
	s, err := v.Encode()
	require.NoError(t, err)
	// The example in the package documentation.
	assert.Equal(t, "v1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-0--csi-vol-5d41402abc4b2a76b9719d911017c592", s)
	assert.Len(t, s, 88)
}

func TestSnapshotIDRoundTrip(t *testing.T) {
	for _, v := range []SnapshotID{
		{ClusterID: fsid, Pool: 2, ImageID: "10d2b7b8e3c5", Snap: snapshotName(defaultSnapshotPrefix, "snapshot-1")},
		{ClusterID: "c", Pool: 17, Namespace: "tenant-a", ImageID: "1", Snap: "s-1"},
	} {
		s, err := v.Encode()
		require.NoError(t, err)
		got, err := ParseSnapshotID(s)
		require.NoError(t, err, s)
		assert.Equal(t, v, got)
		assert.Equal(t, s, got.String())
		_, err = ParseVolumeID(s)
		assert.Error(t, err)
	}
	// The figure deploy/README.md gives: 36-byte cluster ID, 12-character
	// image ID, no namespace, default prefix.
	s, err := SnapshotID{ClusterID: fsid, Pool: 2, ImageID: "10d2b7b8e3c5", Snap: snapshotName(defaultSnapshotPrefix, "x")}.Encode()
	require.NoError(t, err)
	assert.Len(t, s, 104)
}

// TestIDLengthLimit checks the 128-byte limit with long cluster IDs and
// namespaces: what fits is accepted up to exactly 128 bytes, what does not
// is refused naming the fields to shorten.
func TestIDLengthLimit(t *testing.T) {
	img := volumeImageName(defaultVolumePrefix, "pvc-0a1b2c3d")
	base := VolumeID{ClusterID: fsid, Pool: 5, Image: img}
	s, _ := base.Encode()
	room := MaxIDLength - len(s)
	require.Equal(t, 40, room, "bytes left for a namespace next to a 36-byte cluster ID")

	// Namespace lengths are prefixed in hex: "0" becomes "26" (+1 byte).
	fit := base
	fit.Namespace = strings.Repeat("n", room-1)
	s, err := fit.Encode()
	require.NoError(t, err)
	assert.Len(t, s, MaxIDLength)
	back, err := ParseVolumeID(s)
	require.NoError(t, err)
	assert.Equal(t, fit, back)

	over := fit
	over.Namespace += "n"
	_, err = over.Encode()
	require.ErrorIs(t, err, ErrIDTooLong)
	assert.Contains(t, err.Error(), "radosNamespace")
	assert.Contains(t, err.Error(), "129 bytes")

	long := base
	long.ClusterID = strings.Repeat("c", 100)
	_, err = long.Encode()
	require.ErrorIs(t, err, ErrIDTooLong)
	assert.Contains(t, err.Error(), "clusterID")

	sn := SnapshotID{ClusterID: fsid, Pool: 5, Namespace: strings.Repeat("n", 30), ImageID: "10d2b7b8e3c5", Snap: snapshotName(defaultSnapshotPrefix, "x")}
	_, err = sn.Encode()
	require.ErrorIs(t, err, ErrIDTooLong)
	assert.Contains(t, err.Error(), "snapshotNamePrefix")
	sn.Namespace = "n"
	s, err = sn.Encode()
	require.NoError(t, err)
	assert.LessOrEqual(t, len(s), MaxIDLength)

	// A string over 128 bytes never parses, even if well formed.
	_, err = ParseVolumeID(over.String())
	assert.True(t, errors.Is(err, ErrIDTooLong), "%v", err)
}

func TestIDRejects(t *testing.T) {
	for _, s := range []string{
		"", "fake-vol-id", "v1", "v1-", "v2-1-c-1-0--img", "V1-1-c-1-0--img",
		"v1-1-c-1-0--",                   // empty image name
		"v1-0--1-0--img",                 // empty cluster ID
		"v1-01-c-1-0--img",               // leading zero
		"v1-1-c-01-0--img",               // leading zero in pool
		"v1-1-c-A-0--img",                // upper-case hex
		"v1-2-c-1-0--img",                // length does not match
		"v1-1-c-1-0--im@g",               // '@' in image name
		"v1-1-c-1-0--im/g",               // '/'
		"v1-1-c-1-0--im g",               // space
		"v1-1-c-1-1-\x00-img",            // control byte in namespace
		"v1-1-c--0--img",                 // empty pool
		"v1-1-c-ffffffffffffffff-0--img", // pool overflow
		"s1-1-c-1-0--0--snap",            // empty image ID
		"s1-1-c-1-0--2-AB-snap",          // image ID not [0-9a-z]
		"s1-1-c-1-0--1-a-",               // empty snapshot name
	} {
		_, errV := ParseVolumeID(s)
		_, errS := ParseSnapshotID(s)
		assert.True(t, errV != nil && errS != nil, "%q parsed", s)
	}
}

func TestEncodeRejectsBadFields(t *testing.T) {
	_, err := VolumeID{ClusterID: "c", Pool: -1, Image: "i"}.Encode()
	assert.Error(t, err)
	_, err = VolumeID{ClusterID: "c", Image: "a@b"}.Encode()
	assert.Error(t, err)
	_, err = VolumeID{ClusterID: "c d", Image: "a"}.Encode()
	assert.Error(t, err)
	_, err = SnapshotID{ClusterID: "c", ImageID: "x_y", Snap: "s"}.Encode()
	assert.Error(t, err)
}

// FuzzParseVolumeID: decoding never panics, and whatever decodes
// re-encodes to the same bytes (one encoding per ID).
func FuzzParseVolumeID(f *testing.F) {
	for _, s := range []string{
		"v1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-0--csi-vol-5d41402abc4b2a76b9719d911017c592",
		"v1-1-c-0-3-a-b-img", "v1-1---0--x", "fake-vol-id", "v1-ff-",
		// Kilobytes of bytes that quote to four each: the error must not
		// quote them all.
		"v1-" + strings.Repeat("\x01", 4096),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v VolumeID
		var err error
		alloctest.Check(t, len(s), func() { v, err = ParseVolumeID(s) })
		if err != nil {
			return
		}
		e, err := v.Encode()
		if err != nil {
			t.Fatalf("%q decoded to %+v which does not encode: %v", s, v, err)
		}
		if e != s {
			t.Fatalf("%q decoded and re-encoded to %q", s, e)
		}
	})
}

// FuzzParseSnapshotID is FuzzParseVolumeID for snapshot IDs.
func FuzzParseSnapshotID(f *testing.F) {
	for _, s := range []string{
		"s1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-0--c-10d2b7b8e3c5-csi-snap-0123456789abcdef0123456789abcdef",
		"s1-1-c-0-0--1-a-s", "s1-1-c-0-0--0--s", "reallyfakesnapshotid",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v SnapshotID
		var err error
		alloctest.Check(t, len(s), func() { v, err = ParseSnapshotID(s) })
		if err != nil {
			return
		}
		e, err := v.Encode()
		if err != nil {
			t.Fatalf("%q decoded to %+v which does not encode: %v", s, v, err)
		}
		if e != s {
			t.Fatalf("%q decoded and re-encoded to %q", s, e)
		}
	})
}

// FuzzParseGroupSnapshotID is FuzzParseVolumeID for group snapshot IDs.
func FuzzParseGroupSnapshotID(f *testing.F) {
	for _, s := range []string{
		"g1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-0--csi-group-snap-0123456789abcdef",
		"g1-1-c-0-0--g", "g1-1-c-0-2-ns-g", "g1-", "g1-" + strings.Repeat("\x7f", 4096),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var g GroupSnapshotID
		var err error
		alloctest.Check(t, len(s), func() { g, err = ParseGroupSnapshotID(s) })
		if err != nil {
			return
		}
		e, err := g.Encode()
		if err != nil {
			t.Fatalf("%q decoded to %+v which does not encode: %v", s, g, err)
		}
		if e != s {
			t.Fatalf("%q decoded and re-encoded to %q", s, e)
		}
	})
}
