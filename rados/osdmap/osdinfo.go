package osdmap

import "github.com/purerbd/purerbd/rados/denc"

// OSDInfo is osd_info_t: the epochs of an OSD's life.
type OSDInfo struct {
	LastCleanBegin uint32
	LastCleanEnd   uint32
	UpFrom         uint32
	UpThru         uint32
	DownAt         uint32
	LostAt         uint32
}

// Decode reads an osd_info_t (a version byte and six epochs).
func (i *OSDInfo) Decode(d *denc.Decoder) {
	d.U8("osd_info_t version")
	i.LastCleanBegin = d.U32("osd_info_t last_clean_begin")
	i.LastCleanEnd = d.U32("osd_info_t last_clean_end")
	i.UpFrom = d.U32("osd_info_t up_from")
	i.UpThru = d.U32("osd_info_t up_thru")
	i.DownAt = d.U32("osd_info_t down_at")
	i.LostAt = d.U32("osd_info_t lost_at")
}

// osdInfoLen is the encoded size of an osd_info_t.
const osdInfoLen = 25

// OSDXInfo is osd_xinfo_t: extended, less often needed OSD state.
type OSDXInfo struct {
	DownStamp denc.UTime
	// LaggyProbability is encoded as a fraction of 0xffffffff.
	LaggyProbability     uint32
	LaggyInterval        uint32
	Features             uint64
	OldWeight            uint32
	LastPurgedSnapsScrub denc.UTime
	DeadEpoch            uint32
}

// Decode reads an osd_xinfo_t.
func (x *OSDXInfo) Decode(d *denc.Decoder) {
	*x = OSDXInfo{}
	d.Versioned("osd_xinfo_t", 4, func(d *denc.Decoder, v uint8) {
		x.DownStamp.Decode(d)
		x.LaggyProbability = d.U32("osd_xinfo_t laggy_probability")
		x.LaggyInterval = d.U32("osd_xinfo_t laggy_interval")
		if v >= 2 {
			x.Features = d.U64("osd_xinfo_t features")
		}
		if v >= 3 {
			x.OldWeight = d.U32("osd_xinfo_t old_weight")
		}
		if v >= 4 {
			x.LastPurgedSnapsScrub.Decode(d)
			x.DeadEpoch = d.U32("osd_xinfo_t dead_epoch")
		}
		endOfKnown(d, "osd_xinfo_t", v, 4)
	})
}

// osdXInfoMinLen is the smallest osd_xinfo_t encoding (envelope, stamp,
// probability, interval).
const osdXInfoMinLen = 6 + 8 + 4 + 4
