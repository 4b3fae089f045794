package csi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOwnershipGrammar(t *testing.T) {
	h := nameHash("pvc-1")
	for _, c := range []struct {
		name, id string
		live     string
		tomb, ok bool
	}{
		{"csi-vol-" + h, "abc123", "csi-vol-" + h, false, true},
		{"csi-vol-" + h + "-deleted-abc123", "abc123", "csi-vol-" + h, true, true},
		{"csi-vol-" + h + "-deleted-fff", "abc123", "", false, false}, // not its own ID
		{"vm-disk-deleted-2024", "abc123", "", false, false},
		{"vm-disk-deleted-abc123", "abc123", "", true, false},
		{"postgres", "abc123", "", false, false},
		{"csi-vol-" + h[:31] + "X", "abc123", "", false, false},
		{"bad prefix " + h, "abc123", "", false, false},
		{"purerbd-clone-" + h, "abc123", "", false, false},
	} {
		live, tomb, ok := imageLiveName(c.name, c.id)
		assert.Equal(t, c.ok, ok, c.name)
		if c.ok {
			assert.Equal(t, c.live, live, c.name)
			assert.Equal(t, c.tomb, tomb, c.name)
		}
	}
	assert.True(t, hasManagedShape("csi-vol-"+h))
	assert.True(t, hasManagedShape("csi-vol-"+h+"-deleted-x"))
	assert.False(t, hasManagedShape("csi-vol-"+h+"-deleted-"))
	assert.False(t, hasManagedShape("vm-disk-deleted-2024"))

	for _, c := range []struct {
		sn   SnapInfo
		want bool
	}{
		{SnapInfo{ID: 7, Name: "purerbd-clone-" + h}, true},
		{SnapInfo{ID: 7, Name: "purerbd-clone-nothash"}, false},
		{SnapInfo{ID: 7, Name: "purerbd-clone-" + h + "0"}, false},
		{SnapInfo{ID: 7, Name: "csi-snap-" + h + "-deleted-7"}, true},
		{SnapInfo{ID: 7, Name: "csi-snap-" + h + "-deleted-8"}, false},
		{SnapInfo{ID: 7, Name: "before-deleted-rows-fix"}, false},
		{SnapInfo{ID: 7, Name: "before-deleted-7"}, false},
		{SnapInfo{ID: 7, Name: "csi-snap-" + h}, false},
	} {
		assert.Equal(t, c.want, isCollectableSnap(c.sn), c.sn.Name)
	}
}
