package csi_test

import (
	"context"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/purerbd/purerbd/csi"
)

func TestTopologyFromLabels(t *testing.T) {
	labels := map[string]string{
		"topology.kubernetes.io/region": "east",
		"topology.kubernetes.io/zone":   "east-1",
		"rack":                          "r7",
	}
	topo, err := csi.TopologyFromLabels("topology.kubernetes.io/region,topology.kubernetes.io/zone,rack", labels, "rbd.csi.ceph.com")
	require.NoError(t, err)
	// the keys ceph-csi's GetTopologyFromDomainLabels makes
	assert.Equal(t, map[string]string{
		"topology.rbd.csi.ceph.com/region": "east",
		"topology.rbd.csi.ceph.com/zone":   "east-1",
		"topology.rbd.csi.ceph.com/rack":   "r7",
	}, topo)

	topo, err = csi.TopologyFromLabels("", labels, csi.DefaultDriverName)
	require.NoError(t, err)
	assert.Nil(t, topo, "no domain labels, no topology")

	for _, c := range []struct{ labels, msg string }{
		{"topology.kubernetes.io/zone,failure-domain/x", `no label failure-domain/x`},
		{"rack,rack", `"rack" is named twice`},
		{"rack,", `an empty label name`},
	} {
		_, err := csi.TopologyFromLabels(c.labels, labels, csi.DefaultDriverName)
		require.Error(t, err, c.labels)
		assert.Contains(t, err.Error(), c.msg)
	}
	_, err = csi.TopologyFromLabels("rack", labels, "a-driver-name-so-long-that-the-topology-prefix-passes-63.example.com")
	assert.ErrorContains(t, err, "longer than 63")
}

// TestTopologyConstrainedPools provisions from a class in the shape of
// ceph-csi's examples/rbd/storageclass.yaml with topologyConstrainedPools
// uncommented: the pool follows the request's topology, preferred first.
func TestTopologyConstrainedPools(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.store.AddPool(testCluster, "east-pool", 10<<30)
	h.store.AddPool(testCluster, "west-pool", 20<<30)
	h.store.AddPool(testCluster, "west-ec", 20<<30)
	ctx := context.Background()
	const key = "topology." + csi.DefaultDriverName + "/zone"
	zone := func(z string) *csipb.Topology {
		return &csipb.Topology{Segments: map[string]string{key: z, "topology." + csi.DefaultDriverName + "/region": "r1"}}
	}
	class := map[string]string{"clusterID": testCluster, "topologyConstrainedPools": `[
		{"poolName": "east-pool", "domainSegments": [{"domainLabel": "region", "value": "r1"}, {"domainLabel": "zone", "value": "east"}]},
		{"poolName": "west-pool", "dataPool": "west-ec", "domainSegments": [{"domainLabel": "zone", "value": "west"}]}
	]`}
	create := func(name string, req *csipb.TopologyRequirement) (*csipb.Volume, error) {
		r := h.volReq(name, 1<<20)
		r.Parameters = class
		r.AccessibilityRequirements = req
		resp, err := h.ctrl.CreateVolume(ctx, r)
		return resp.GetVolume(), err
	}

	// preferred wins over requisite order
	v, err := create("pref", &csipb.TopologyRequirement{
		Requisite: []*csipb.Topology{zone("east"), zone("west")},
		Preferred: []*csipb.Topology{zone("west"), zone("east")},
	})
	require.NoError(t, err)
	assert.Equal(t, "west-pool", v.GetVolumeContext()["pool"])
	assert.Equal(t, "west-ec", v.GetVolumeContext()["dataPool"])
	require.Len(t, v.GetAccessibleTopology(), 1)
	assert.Equal(t, "west", v.GetAccessibleTopology()[0].GetSegments()[key])

	// no preferred match: the first requisite one some pool serves
	v, err = create("req", &csipb.TopologyRequirement{
		Requisite: []*csipb.Topology{zone("north"), zone("east")},
		Preferred: []*csipb.Topology{zone("north")},
	})
	require.NoError(t, err)
	assert.Equal(t, "east-pool", v.GetVolumeContext()["pool"])
	assert.Equal(t, "east", v.GetAccessibleTopology()[0].GetSegments()[key])

	// a topology no pool serves: RESOURCE_EXHAUSTED, as the CSI spec says
	_, err = create("none", &csipb.TopologyRequirement{Requisite: []*csipb.Topology{zone("north")}})
	assert.Equal(t, codes.ResourceExhausted, code(err), "%v", err)

	// no requirements (nodes report no topology): the class's pool, or
	// INVALID_ARGUMENT when it names none
	_, err = create("no-req", nil)
	assert.Equal(t, codes.InvalidArgument, code(err), "%v", err)
	class["pool"] = "rbd"
	v, err = create("no-req", nil)
	require.NoError(t, err)
	assert.Equal(t, "rbd", v.GetVolumeContext()["pool"])
	assert.Empty(t, v.GetAccessibleTopology())

	// capacity follows the topology asked about
	r, err := h.ctrl.GetCapacity(ctx, &csipb.GetCapacityRequest{Parameters: class, AccessibleTopology: zone("west")})
	require.NoError(t, err)
	assert.EqualValues(t, 20<<30, r.GetAvailableCapacity())
	r, err = h.ctrl.GetCapacity(ctx, &csipb.GetCapacityRequest{Parameters: class, AccessibleTopology: zone("north")})
	require.NoError(t, err)
	assert.Zero(t, r.GetAvailableCapacity())
}
