package monc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// encodeGetOSDMap builds the front of an MMonGetOSDMap asking for the
// full maps [fullFirst, fullLast] and the incrementals [incFirst,
// incLast] (0, 0 for none).
func encodeGetOSDMap(fullFirst, fullLast, incFirst, incLast uint32) []byte {
	e := denc.NewEncoder(make([]byte, 0, denc.PaxosHeaderLen+16))
	denc.EncodePaxosHeader(e, 0)
	e.U32(fullFirst)
	e.U32(fullLast)
	e.U32(incFirst)
	e.U32(incLast)
	return e.Bytes()
}

// osdMapEpochs is what the monitor client reads of an MOSDMap: which
// epochs it carries and what the monitor has. The maps themselves are
// left to the OSDMap decoder.
type osdMapEpochs struct {
	fsid denc.UUID
	// incFirst..incLast and fullFirst..fullLast: the lowest and highest
	// incremental and full epochs carried (0 when none).
	incFirst, incLast   uint32
	fullFirst, fullLast uint32
	full                []uint32 // every full epoch carried, ascending
	// oldest and newest are the range of epochs the sender has
	// (version 2 and later; 0 before).
	oldest, newest uint32
}

// last returns the highest epoch carried, 0 for none.
func (e osdMapEpochs) last() uint32 { return max(e.incLast, e.fullLast) }

// hasFull reports whether the full map of epoch is carried.
func (e osdMapEpochs) hasFull(epoch uint32) bool {
	for _, f := range e.full {
		if f == epoch {
			return true
		}
	}
	return false
}

// decodeOSDMapEpochs reads the envelope of an MOSDMap front: fsid, the
// map<epoch_t, bufferlist> of incrementals and of full maps (skipped, not
// decoded), then oldest and newest epochs from version 2 on.
func decodeOSDMapEpochs(b []byte, version uint16) (osdMapEpochs, error) {
	var r osdMapEpochs
	d := denc.NewDecoder(b)
	r.fsid.Decode(d)
	epochs := func(what string, full bool) (first, last uint32) {
		n := d.Count(what, 8)
		for i := 0; i < n && d.Err() == nil; i++ {
			e := d.U32(what + " epoch")
			d.Blob(what + " map")
			if d.Err() != nil {
				break
			}
			if i > 0 && e <= last {
				d.Failf(what, "epoch %d after %d: keys out of order", e, last)
				break
			}
			if i == 0 {
				first = e
			}
			last = e
			if full {
				r.full = append(r.full, e)
			}
		}
		return first, last
	}
	r.incFirst, r.incLast = epochs("MOSDMap incremental_maps", false)
	r.fullFirst, r.fullLast = epochs("MOSDMap maps", true)
	if version >= 2 {
		r.oldest = d.U32("MOSDMap oldest_map")
		r.newest = d.U32("MOSDMap newest_map")
	}
	if err := d.Err(); err != nil {
		return osdMapEpochs{}, fmt.Errorf("monc: MOSDMap: %w", err)
	}
	return r, nil
}
