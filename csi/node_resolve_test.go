package csi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi/internal/nodestate"
)

// TestRecordedVolume: a restarted plugin finds a ceph-csi or static
// volume's image in its record, a purerbd volume's in its ID.
func TestRecordedVolume(t *testing.T) {
	native := testVolumeID("csi-vol-1")
	v, err := recordedVolume(&nodestate.Record{VolumeID: native})
	require.NoError(t, err)
	assert.Equal(t, VolumeID{ClusterID: testClusterID, Pool: 2, Image: "csi-vol-1"}, v)

	rec := &nodestate.Record{VolumeID: "0001-000c-test-cluster-0000000000000002-00000000-1111-2222-bbbb-cacacacacaca",
		Image: &nodestate.Image{ClusterID: testClusterID, Pool: 2, Namespace: "ns", Name: "csi-vol-00000000-1111-2222-bbbb-cacacacacaca"}}
	v, err = recordedVolume(rec)
	require.NoError(t, err)
	assert.Equal(t, VolumeID{ClusterID: testClusterID, Pool: 2, Namespace: "ns", Image: "csi-vol-00000000-1111-2222-bbbb-cacacacacaca"}, v)

	_, err = recordedVolume(&nodestate.Record{VolumeID: "static", Image: &nodestate.Image{ClusterID: testClusterID, Pool: 2, Name: "a/b"}})
	assert.Error(t, err)
	_, err = recordedVolume(&nodestate.Record{VolumeID: "static"})
	assert.Error(t, err)

	// recordImage keeps nothing for purerbd's IDs.
	r, err := parseNodeVolume(native, nil)
	require.NoError(t, err)
	assert.Nil(t, recordImage(r, v))
	r, err = parseNodeVolume("static", map[string]string{ctxStaticVolume: "true", ctxClusterID: testClusterID, ctxPool: "rbd"})
	require.NoError(t, err)
	assert.Equal(t, &nodestate.Image{ClusterID: testClusterID, Pool: 2, Namespace: "ns", Name: "csi-vol-00000000-1111-2222-bbbb-cacacacacaca"}, recordImage(r, v))
}
