package csi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ceph-csi's own vector (internal/util/volid_test.go), with encoding
// version 1 in place of the 0xffff its test uses (only 1 exists).
const cephCSIVector = "0001-0024-01616094-9d93-4178-bf45-c7eac19e8b15-000000000000ffff-00000000-1111-2222-bbbb-cacacacacaca"

func TestParseCephCSIID(t *testing.T) {
	c, err := ParseCephCSIID(cephCSIVector)
	require.NoError(t, err)
	assert.Equal(t, CephCSIID{ClusterID: "01616094-9d93-4178-bf45-c7eac19e8b15", Pool: 0xffff, UUID: "00000000-1111-2222-bbbb-cacacacacaca"}, c)
	s, err := c.Encode()
	require.NoError(t, err)
	assert.Equal(t, cephCSIVector, s)

	// Rook's cluster IDs are namespace names; the longest fits exactly.
	long := CephCSIID{ClusterID: strings.Repeat("r", 64), Pool: 3, UUID: "0a1b2c3d-4e5f-6789-abcd-ef0123456789"}
	s, err = long.Encode()
	require.NoError(t, err)
	assert.Len(t, s, MaxIDLength)
	back, err := ParseCephCSIID(s)
	require.NoError(t, err)
	assert.Equal(t, long, back)
	long.ClusterID += "r"
	_, err = long.Encode()
	assert.Error(t, err)

	for _, bad := range []string{
		"",
		"ffff" + cephCSIVector[4:], // unknown version
		"0001-0023-01616094-9d93-4178-bf45-c7eac19e8b15-000000000000ffff-00000000-1111-2222-bbbb-cacacacacaca", // length off by one
		"0001-0024-01616094-9d93-4178-bf45-c7eac19e8b15_000000000000ffff-00000000-1111-2222-bbbb-cacacacacaca", // separator
		"0001-0024-01616094-9d93-4178-bf45-c7eac19e8b15-000000000000FFFF-00000000-1111-2222-bbbb-cacacacacaca", // upper-case pool
		"0001-0024-01616094-9d93-4178-bf45-c7eac19e8b15-800000000000ffff-00000000-1111-2222-bbbb-cacacacacaca", // negative pool
		"0001-0024-01616094-9d93-4178-bf45-c7eac19e8b15-000000000000ffff-00000000-1111-2222-bbbb-CACACACACACA", // upper-case UUID
		"0001-0024-01616094-9d93-4178-bf45-c7eac19e8b15-000000000000ffff-00000000x1111-2222-bbbb-cacacacacaca", // UUID form
		"0001-0024-01616094-9d93-4178-bf45-c7eac19e8b15-000000000000ffff-00000000-1111-2222-bbbb-cacacacacac",  // short
		cephCSIVector + "a", // trailing
		"0001-0003-a b-0000000000000001-00000000-1111-2222-bbbb-cacacacacaca",                      // space in cluster ID
		"v1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-0--csi-vol-5d41402abc4b2a76b9719d911017c592", // purerbd's
	} {
		_, err := ParseCephCSIID(bad)
		assert.ErrorIs(t, err, ErrNotCephCSIID, "%q", bad)
	}
}

func TestVolumeHandleFormats(t *testing.T) {
	h, err := parseVolumeHandle(cephCSIVector)
	require.NoError(t, err)
	require.NotNil(t, h.cephcsi)
	assert.Equal(t, "01616094-9d93-4178-bf45-c7eac19e8b15", h.clusterID())
	const native = "v1-24-b6f6c1d2-8a9e-4e4b-9a43-3f0b8d6c3e07-2-0--csi-vol-5d41402abc4b2a76b9719d911017c592"
	h, err = parseVolumeHandle(native)
	require.NoError(t, err)
	assert.Nil(t, h.cephcsi)
	assert.Equal(t, "csi-vol-5d41402abc4b2a76b9719d911017c592", h.native.Image)
	_, err = parseVolumeHandle("static-image")
	assert.Error(t, err)
	sh, err := parseSnapshotHandle(cephCSIVector)
	require.NoError(t, err)
	assert.NotNil(t, sh.cephcsi)
}

func TestSplitCephCSIName(t *testing.T) {
	p, u, ok := splitCephCSIName("csi-vol-00000000-1111-2222-bbbb-cacacacacaca")
	assert.True(t, ok)
	assert.Equal(t, "csi-vol-", p)
	assert.Equal(t, "00000000-1111-2222-bbbb-cacacacacaca", u)
	for _, n := range []string{"00000000-1111-2222-bbbb-cacacacacaca", "csi-vol-5d41402abc4b2a76b9719d911017c592", "csi-vol-00000000-1111-2222-bbbb-cacacacacaca-deleted-1234"} {
		_, _, ok := splitCephCSIName(n)
		assert.False(t, ok, n)
	}
}

// FuzzParseCephCSIID checks that whatever parses composes back to the
// same bytes, and that parsing never panics.
func FuzzParseCephCSIID(f *testing.F) {
	f.Add(cephCSIVector)
	f.Add("0001-0003-abc-0000000000000000-0a1b2c3d-4e5f-6789-abcd-ef0123456789")
	f.Add("0001-ffff-")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCephCSIID(s)
		if err != nil {
			return
		}
		enc, err := c.Encode()
		if err != nil {
			t.Fatalf("%q parsed to %+v, which does not encode: %v", s, c, err)
		}
		if enc != s {
			t.Fatalf("%q parsed to %+v, which encodes to %q", s, c, enc)
		}
	})
}
