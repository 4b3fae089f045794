package cls

import "github.com/purerbd/purerbd/rados/denc"

// Methods on an image's header object (rbd_header.<id>) that describe the
// image itself.

// Create is rbd.create: initialise a new header. dataPool is -1 when the
// data objects live in the header's pool.
func Create(size uint64, order uint8, features uint64, objectPrefix string, dataPool int64) Method {
	return rbd("create", args(func(e *denc.Encoder) {
		e.U64(size)
		e.U8(order)
		e.U64(features)
		e.String(objectPrefix)
		e.I64(dataPool)
	}))
}

// GetSize is rbd.get_size for snap (NoSnap for the head).
func GetSize(snap uint64) Method { return rbd("get_size", args(func(e *denc.Encoder) { e.U64(snap) })) }

// DecodeGetSize parses get_size's reply.
func DecodeGetSize(out []byte) (size uint64, order uint8, err error) {
	err = reply("get_size", out, func(d *denc.Decoder) {
		order = d.U8("order")
		size = d.U64("size")
	})
	return
}

// SetSize is rbd.set_size.
func SetSize(size uint64) Method { return rbd("set_size", args(func(e *denc.Encoder) { e.U64(size) })) }

// GetFeatures is rbd.get_features for snap; readOnly asks the class to
// leave out features only writers need to understand.
func GetFeatures(snap uint64, readOnly bool) Method {
	return rbd("get_features", args(func(e *denc.Encoder) { e.U64(snap); e.Bool(readOnly) }))
}

// DecodeGetFeatures parses get_features' reply.
func DecodeGetFeatures(out []byte) (features, incompatible uint64, err error) {
	err = reply("get_features", out, func(d *denc.Decoder) {
		features = d.U64("features")
		incompatible = d.U64("incompatible")
	})
	return
}

// SetFeatures is rbd.set_features: features under mask are set to the
// given values.
func SetFeatures(features, mask uint64) Method {
	return rbd("set_features", args(func(e *denc.Encoder) { e.U64(features); e.U64(mask) }))
}

// GetAllFeatures is rbd.get_all_features: what the OSD's class supports.
func GetAllFeatures() Method { return rbd("get_all_features", nil) }

// DecodeU64 parses a reply that is one u64 (get_all_features,
// op_features_get, get_flags, snapshot_get_limit).
func DecodeU64(out []byte) (v uint64, err error) {
	err = reply("u64", out, func(d *denc.Decoder) { v = d.U64("value") })
	return
}

// DecodeString parses a reply that is one string (get_object_prefix,
// get_id, dir_get_id, dir_get_name, metadata_get, get_snapshot_name).
func DecodeString(out []byte) (s string, err error) {
	err = reply("string", out, func(d *denc.Decoder) { s = d.String("value") })
	return
}

// DecodeUTime parses a reply that is one utime_t (get_create_timestamp,
// get_modify_timestamp, get_access_timestamp, get_snapshot_timestamp).
func DecodeUTime(out []byte) (t denc.UTime, err error) {
	err = reply("utime", out, func(d *denc.Decoder) { t.Decode(d) })
	return
}

// GetObjectPrefix is rbd.get_object_prefix ("rbd_data.<id>").
func GetObjectPrefix() Method { return rbd("get_object_prefix", nil) }

// GetDataPool is rbd.get_data_pool.
func GetDataPool() Method { return rbd("get_data_pool", nil) }

// DecodeGetDataPool parses get_data_pool's reply (-1: no data pool).
func DecodeGetDataPool(out []byte) (pool int64, err error) {
	err = reply("get_data_pool", out, func(d *denc.Decoder) { pool = d.I64("data_pool_id") })
	return
}

// GetStripeUnitCount is rbd.get_stripe_unit_count.
func GetStripeUnitCount() Method { return rbd("get_stripe_unit_count", nil) }

// DecodeGetStripeUnitCount parses get_stripe_unit_count's reply.
func DecodeGetStripeUnitCount(out []byte) (unit, count uint64, err error) {
	err = reply("get_stripe_unit_count", out, func(d *denc.Decoder) {
		unit = d.U64("stripe_unit")
		count = d.U64("stripe_count")
	})
	return
}

// SetStripeUnitCount is rbd.set_stripe_unit_count.
func SetStripeUnitCount(unit, count uint64) Method {
	return rbd("set_stripe_unit_count", args(func(e *denc.Encoder) { e.U64(unit); e.U64(count) }))
}

// GetCreateTimestamp is rbd.get_create_timestamp.
func GetCreateTimestamp() Method { return rbd("get_create_timestamp", nil) }

// GetModifyTimestamp is rbd.get_modify_timestamp.
func GetModifyTimestamp() Method { return rbd("get_modify_timestamp", nil) }

// GetAccessTimestamp is rbd.get_access_timestamp.
func GetAccessTimestamp() Method { return rbd("get_access_timestamp", nil) }

// OpFeaturesGet is rbd.op_features_get.
func OpFeaturesGet() Method { return rbd("op_features_get", nil) }

// OpFeaturesSet is rbd.op_features_set.
func OpFeaturesSet(opFeatures, mask uint64) Method {
	return rbd("op_features_set", args(func(e *denc.Encoder) { e.U64(opFeatures); e.U64(mask) }))
}

// GetFlags is rbd.get_flags for snap.
func GetFlags(snap uint64) Method {
	return rbd("get_flags", args(func(e *denc.Encoder) { e.U64(snap) }))
}

// SetFlags is rbd.set_flags: flags under mask are set on snap.
func SetFlags(snap, flags, mask uint64) Method {
	return rbd("set_flags", args(func(e *denc.Encoder) { e.U64(flags); e.U64(mask); e.U64(snap) }))
}

// GetSnapContext is rbd.get_snapcontext.
func GetSnapContext() Method { return rbd("get_snapcontext", nil) }

// DecodeGetSnapContext parses get_snapcontext's reply and checks that the
// context is valid.
func DecodeGetSnapContext(out []byte) (sc denc.SnapContext, err error) {
	err = reply("get_snapcontext", out, func(d *denc.Decoder) {
		sc.Decode(d)
		if d.Err() == nil && !sc.Valid() {
			d.Failf("snap context", "invalid %s", sc)
		}
	})
	return
}

// AssertSnapcSeq is rbd.assert_snapc_seq (state: 0 greater-than-current,
// 1 less-than-or-equal).
func AssertSnapcSeq(seq uint64, state uint8) Method {
	return rbd("assert_snapc_seq", args(func(e *denc.Encoder) { e.U64(seq); e.U8(state) }))
}

// Copyup is rbd.copyup: write data into a clone's object only if the
// object does not exist yet.
func Copyup(data []byte) Method { return rbd("copyup", data) }

// SparseCopyup is rbd.sparse_copyup: like Copyup with an extent map
// (offset to length, in offset order) saying where data goes.
func SparseCopyup(extents [][2]uint64, data []byte) Method {
	return rbd("sparse_copyup", args(func(e *denc.Encoder) {
		denc.PutList(e, extents, func(e *denc.Encoder, x [2]uint64) { e.U64(x[0]); e.U64(x[1]) })
		e.Blob(data)
	}))
}

// Sparsify is rbd.sparsify on a data object: zero runs of at least
// sparseSize aligned bytes are punched out, trailing zeros truncated,
// and, with removeEmpty, an object left empty removed.
func Sparsify(sparseSize uint64, removeEmpty bool) Method {
	return rbd("sparsify", args(func(e *denc.Encoder) { e.U64(sparseSize); e.Bool(removeEmpty) }))
}
