package csi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCrushLocation(t *testing.T) {
	node := map[string]string{
		"topology.kubernetes.io/zone":   "eu-1a",
		"kubernetes.io/hostname":        "node-1.example.com",
		"topology.rook.io/rack":         " rack2 ",
		"node-role.kubernetes.io/other": "x",
		"plain":                         "p",
	}
	assert.Equal(t, map[string]string{"zone": "eu-1a", "host": "node-1-example-com", "rack": "rack2", "plain": "p"},
		CrushLocation([]string{"topology.kubernetes.io/zone", "kubernetes.io/hostname", "topology.rook.io/rack", "plain", "missing/label"}, node))
	assert.Nil(t, CrushLocation([]string{"missing"}, node))
	assert.Nil(t, CrushLocation(nil, node))

	cs, err := ParseClusters([]byte(`[{"clusterID": "a", "monitors": ["x:1"],
		"readAffinity": {"enabled": true, "crushLocationLabels": ["topology.kubernetes.io/zone"]}}]`))
	assert.NoError(t, err)
	assert.True(t, cs[0].ReadAffinity)
	assert.Equal(t, []string{"topology.kubernetes.io/zone"}, cs[0].CrushLocationLabels)
}
