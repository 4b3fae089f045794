package osdc

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"

	"github.com/purerbd/purerbd/rados/denc"
)

// HObject is Ceph's hobject_t: an object's full identity inside a pool
// as OSDs sort and range over it — pool, placement hash, namespace,
// locator key, name and snapshot — or the maximum object (Max), which
// sorts after everything. Listing cursors and backoff ranges are
// HObjects. Versioned 4,3.
type HObject struct {
	Key       string
	OID       string
	Snap      uint64
	Hash      uint32
	Max       bool
	Namespace string
	Pool      int64
}

// MinHObject returns the smallest object (hobject_t()), where listing
// starts.
func MinHObject() HObject { return HObject{Pool: math.MinInt64} }

// MaxHObject returns the maximum object (hobject_t::get_max()).
func MaxHObject() HObject { return HObject{Max: true} }

// IsMin reports whether h is the smallest object.
func (h HObject) IsMin() bool {
	return h == MinHObject()
}

// Decode reads an hobject_t.
func (h *HObject) Decode(d *denc.Decoder) {
	*h = HObject{}
	d.VersionedLegacy("hobject_t", 4, 3, 3, 0, func(d *denc.Decoder, v uint8) {
		if v >= 1 {
			h.Key = d.String("hobject_t key")
		}
		h.OID = d.String("hobject_t oid")
		h.Snap = d.U64("hobject_t snap")
		h.Hash = d.U32("hobject_t hash")
		if v >= 2 {
			h.Max = d.Bool("hobject_t max")
		}
		if v >= 4 {
			h.Namespace = d.String("hobject_t nspace")
			h.Pool = d.I64("hobject_t pool")
			if h.Pool == -1 && h.Snap == 0 && h.Hash == 0 && !h.Max && h.OID == "" {
				h.Pool = math.MinInt64 // hammer's spelling of the minimum
			}
		}
	})
	if h.Max {
		*h = MaxHObject()
	}
}

// Encode writes an hobject_t.
func (h HObject) Encode(e *denc.Encoder) {
	e.Versioned(4, 3, func(e *denc.Encoder) {
		e.String(h.Key)
		e.String(h.OID)
		e.U64(h.Snap)
		e.U32(h.Hash)
		e.Bool(h.Max)
		e.String(h.Namespace)
		e.I64(h.Pool)
	})
}

// effectiveKey is the locator key, or the name when there is none.
func (h HObject) effectiveKey() string {
	if h.Key != "" {
		return h.Key
	}
	return h.OID
}

// Compare orders objects as OSDs do with bitwise sorting: max, pool, the
// bit-reversed hash, namespace, effective key, name, snapshot.
func (h HObject) Compare(o HObject) int {
	if h.Max != o.Max {
		if h.Max {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(h.Pool, o.Pool); c != 0 {
		return c
	}
	if c := cmp.Compare(bits.Reverse32(h.Hash), bits.Reverse32(o.Hash)); c != 0 {
		return c
	}
	if c := cmp.Compare(h.Namespace, o.Namespace); c != 0 {
		return c
	}
	if h.Key != "" || o.Key != "" {
		if c := cmp.Compare(h.effectiveKey(), o.effectiveKey()); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(h.OID, o.OID); c != 0 {
		return c
	}
	return cmp.Compare(h.Snap, o.Snap)
}

// String formats h roughly as Ceph does (pool:reversed-hash:ns:key:name:snap).
func (h HObject) String() string {
	if h.Max {
		return "MAX"
	}
	if h.IsMin() {
		return "MIN"
	}
	return fmt.Sprintf("%d:%08x:%s:%s:%s:%x", h.Pool, bits.Reverse32(h.Hash), h.Namespace, h.Key, h.OID, h.Snap)
}
