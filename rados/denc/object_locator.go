package denc

import "strconv"

// ObjectLocator is Ceph's object_locator_t: where an object lives beyond
// its name — pool, locator key, namespace, and optionally an explicit
// placement hash that replaces hashing the key or name.
//
// Hash is -1 when unset (Ceph's default); a zero ObjectLocator therefore
// carries hash 0, so build locators with NewObjectLocator. Ceph refuses a
// locator with both a key and a hash.
type ObjectLocator struct {
	Pool      int64
	Key       string
	Namespace string
	Hash      int64
}

// NewObjectLocator returns a locator for pool with no key, namespace or
// hash.
func NewObjectLocator(pool int64) ObjectLocator { return ObjectLocator{Pool: pool, Hash: -1} }

// Decode reads an object_locator_t, including the pre-length encodings
// (versions 1 and 2) Ceph still accepts.
func (l *ObjectLocator) Decode(d *Decoder) {
	*l = ObjectLocator{Hash: -1}
	d.VersionedLegacy("object_locator_t", 6, 3, 3, 0, func(d *Decoder, v uint8) {
		if v < 2 {
			l.Pool = int64(d.I32("object_locator_t pool"))
			d.Skip("object_locator_t preferred", 2)
		} else {
			l.Pool = d.I64("object_locator_t pool")
			d.Skip("object_locator_t preferred", 4)
		}
		l.Key = d.String("object_locator_t key")
		if v >= 5 {
			l.Namespace = d.String("object_locator_t namespace")
		}
		if v >= 6 {
			l.Hash = d.I64("object_locator_t hash")
		}
	})
	if d.Err() == nil && l.Hash != -1 && l.Key != "" {
		d.Failf("object_locator_t", "both a key and a hash")
	}
}

// Encode writes an object_locator_t, version 6. The compat version is 3
// unless a hash is set, which older decoders cannot interpret (6).
func (l ObjectLocator) Encode(e *Encoder) {
	compat := uint8(3)
	if l.Hash != -1 {
		compat = 6
	}
	e.Versioned(6, compat, func(e *Encoder) {
		e.I64(l.Pool)
		e.I32(-1) // preferred OSD, long unused
		e.String(l.Key)
		e.String(l.Namespace)
		e.I64(l.Hash)
	})
}

// String formats l like Ceph's operator<<: "@pool[;ns][:key]".
func (l ObjectLocator) String() string {
	s := "@" + strconv.FormatInt(l.Pool, 10)
	if l.Namespace != "" {
		s += ";" + l.Namespace
	}
	if l.Key != "" {
		s += ":" + l.Key
	}
	return s
}
