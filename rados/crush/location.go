package crush

import (
	"sort"
	"strings"
)

// FullLocation is the CRUSH location of item id, as Ceph's
// CrushWrapper::get_full_location: for each bucket above it, the
// bucket's name by its type's name ("host": "node-a", "root":
// "default"). The shadow buckets of device classes are left out.
func (m *Map) FullLocation(id int32) map[string]string {
	loc := map[string]string{}
	for cur, depth := id, 0; depth < len(m.Buckets)+1; depth++ {
		b := m.immediateParent(cur)
		if b == nil {
			break
		}
		loc[m.Types[int32(b.Type)]] = m.Names[b.ID]
		cur = b.ID
	}
	return loc
}

// immediateParent is the first bucket (by index) that holds id and is
// not a shadow bucket, as Ceph's get_immediate_parent; nil for none.
func (m *Map) immediateParent(id int32) *Bucket {
	for _, b := range m.Buckets {
		if b == nil || strings.Contains(m.Names[b.ID], "~") {
			continue
		}
		for _, it := range b.Items {
			if it == id {
				return b
			}
		}
	}
	return nil
}

// CommonAncestorDistance is Ceph's get_common_ancestor_distance: the id
// of the lowest bucket type at which item id's location and loc (type
// name -> bucket name, a client's crush_location) name the same bucket.
// ok is false when they share none, or id is not in the map: the
// objecter then reads from the primary.
func (m *Map) CommonAncestorDistance(id int32, loc map[string]string) (distance int32, ok bool) {
	if _, named := m.Names[id]; !named {
		return 0, false
	}
	full := m.FullLocation(id)
	types := make([]int32, 0, len(m.Types))
	for t := range m.Types {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	for _, t := range types {
		name := m.Types[t]
		at, ok := full[name]
		if !ok {
			continue
		}
		if want, ok := loc[name]; ok && want == at {
			return t, true
		}
	}
	return 0, false
}
