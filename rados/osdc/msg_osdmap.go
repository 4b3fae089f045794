package osdc

import (
	"fmt"
	"sort"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// MOSDMap carries OSD maps (CEPH_MSG_OSD_MAP): full maps and
// incrementals, keyed by epoch, still encoded. Monitors send it to
// subscribers; OSDs send it to clients whose map is older than theirs.
type MOSDMap struct {
	FSID         denc.UUID
	Incrementals map[uint32][]byte
	Maps         map[uint32][]byte
	Oldest       uint32 // oldest map the sender has
	Newest       uint32 // newest map the sender has
}

// DecodeOSDMapMessage decodes an MOSDMap. The map encodings alias
// msg.Front.
func DecodeOSDMapMessage(msg *msgr.Message) (*MOSDMap, error) {
	if msg.Type != MsgOSDMap {
		return nil, fmt.Errorf("osdc: message type %d is not MOSDMap", msg.Type)
	}
	m := &MOSDMap{}
	d := denc.NewDecoder(msg.Front)
	m.FSID.Decode(d)
	epochBlobs := func(what string) map[uint32][]byte {
		return denc.Map(d, what, 8, func(d *denc.Decoder) (uint32, []byte) {
			return d.U32(what + " epoch"), d.Blob(what + " map")
		})
	}
	m.Incrementals = epochBlobs("MOSDMap incremental_maps")
	m.Maps = epochBlobs("MOSDMap maps")
	if msg.Version >= 2 {
		m.Oldest = d.U32("MOSDMap oldest_map")
		m.Newest = d.U32("MOSDMap newest_map")
	}
	// v4 appends gap_removed_snaps (unused since Octopus), v5 a trim
	// bound: nothing a client needs.
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("osdc: MOSDMap: %w", err)
	}
	return m, nil
}

// Message encodes m as a v4 MOSDMap (for tests).
func (m *MOSDMap) Message() *msgr.Message {
	e := denc.NewEncoder(nil)
	m.FSID.Encode(e)
	put := func(maps map[uint32][]byte) {
		keys := sortedEpochs(maps)
		denc.PutMap(e, maps, keys, func(e *denc.Encoder, k uint32, v []byte) {
			e.U32(k)
			e.Blob(v)
		})
	}
	put(m.Incrementals)
	put(m.Maps)
	e.U32(m.Oldest)
	e.U32(m.Newest)
	e.U32(0) // gap_removed_snaps
	return &msgr.Message{Type: MsgOSDMap, Version: 4, CompatVersion: 3, Front: e.Bytes()}
}

func sortedEpochs(m map[uint32][]byte) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
