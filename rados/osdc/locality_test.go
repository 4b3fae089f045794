package osdc

import (
	"testing"

	"github.com/purerbd/purerbd/rados/crush"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// TestNearestReplica checks the objecter's choice for localized reads
// on a hand-made map: root default > zones z1 (hosts hA, hB) and z2
// (host hC), osd.N in the Nth host. The primary (first of the acting
// set) wins ties and reads from clients no bucket matches.
func TestNearestReplica(t *testing.T) {
	cm := &crush.Map{
		Buckets: []*crush.Bucket{
			{ID: -1, Type: 11, Items: []int32{-2, -3}}, // root default
			{ID: -2, Type: 9, Items: []int32{-4, -5}},  // zone z1
			{ID: -3, Type: 9, Items: []int32{-6}},      // zone z2
			{ID: -4, Type: 1, Items: []int32{0}},       // host hA
			{ID: -5, Type: 1, Items: []int32{1}},       // host hB
			{ID: -6, Type: 1, Items: []int32{2}},       // host hC
			{ID: -7, Type: 1, Items: []int32{0, 1, 2}}, // a device-class shadow: never a location
		},
		Types: map[int32]string{0: "osd", 1: "host", 9: "zone", 11: "root"},
		Names: map[int32]string{-1: "default", -2: "z1", -3: "z2", -4: "hA", -5: "hB", -6: "hC", -7: "default~ssd",
			0: "osd.0", 1: "osd.1", 2: "osd.2"},
	}
	if got := cm.FullLocation(1); len(got) != 3 || got["host"] != "hB" || got["zone"] != "z1" || got["root"] != "default" {
		t.Fatalf("FullLocation(osd.1) = %v", got)
	}
	m := &osdmap.OSDMap{Crush: cm}
	for _, c := range []struct {
		acting []int32
		loc    map[string]string
		want   int32
	}{
		{[]int32{0, 1, 2}, map[string]string{"host": "hB"}, 1},
		{[]int32{0, 1, 2}, map[string]string{"host": "hC"}, 2},
		{[]int32{2, 0, 1}, map[string]string{"host": "hX", "zone": "z1"}, 0}, // zone: the first of z1
		{[]int32{2, 1}, map[string]string{"host": "hA", "zone": "z1"}, 1},    // no host match: the zone
		{[]int32{1, 0, 2}, map[string]string{"root": "default"}, 1},          // a tie: the primary
		{[]int32{1, 0, 2}, map[string]string{"rack": "r1"}, 1},               // nothing in common
		{[]int32{1, 7, 0}, map[string]string{"host": "hA"}, 0},               // osd.7 is not in the map
	} {
		for _, cache := range []*mappingCache{nil, {m: m}} {
			if got := nearestReplica(m, cache, c.acting, c.loc); got != c.want {
				t.Errorf("acting %v from %v: osd.%d, want osd.%d", c.acting, c.loc, got, c.want)
			}
		}
	}
}
