package cls

import (
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/objectmap"
)

// Methods on an image's object map object (rbd_object_map.<id>[.<snap>]).

// ObjectMapLoad is rbd.object_map_load.
func ObjectMapLoad() Method { return rbd("object_map_load", nil) }

// DecodeObjectMapLoad parses object_map_load's reply.
func DecodeObjectMapLoad(out []byte) (*objectmap.BitVector, error) {
	var bv objectmap.BitVector
	err := reply("object_map_load", out, func(d *denc.Decoder) { bv.Decode(d) })
	if err != nil {
		return nil, err
	}
	return &bv, nil
}

// ObjectMapSave is rbd.object_map_save: replace the whole map (sent
// without CRCs, as librbd does).
func ObjectMapSave(bv *objectmap.BitVector) Method {
	c := bv.Clone()
	c.NoCRC = true
	return rbd("object_map_save", c.Marshal())
}

// ObjectMapResize is rbd.object_map_resize: new elements get
// defaultState; shrinking fails unless the dropped objects are
// nonexistent.
func ObjectMapResize(objects uint64, defaultState uint8) Method {
	return rbd("object_map_resize", args(func(e *denc.Encoder) { e.U64(objects); e.U8(defaultState) }))
}

// ObjectMapUpdate is rbd.object_map_update: set objects [start, end) to
// newState, only those currently in *current when current is not nil.
func ObjectMapUpdate(start, end uint64, newState uint8, current *uint8) Method {
	return rbd("object_map_update", args(func(e *denc.Encoder) {
		e.U64(start)
		e.U64(end)
		e.U8(newState)
		if current == nil {
			e.Bool(false)
		} else {
			e.Bool(true)
			e.U8(*current)
		}
	}))
}

// ObjectMapSnapAdd is rbd.object_map_snap_add: after a snapshot, mark
// every EXISTS object EXISTS_CLEAN in the head map (fast-diff).
func ObjectMapSnapAdd() Method { return rbd("object_map_snap_add", nil) }

// ObjectMapSnapRemove is rbd.object_map_snap_remove: fold a removed
// snapshot's map into the next one.
func ObjectMapSnapRemove(snapMap *objectmap.BitVector) Method {
	c := snapMap.Clone()
	c.NoCRC = true
	return rbd("object_map_snap_remove", c.Marshal())
}
