package cls

import (
	"sort"

	"github.com/purerbd/purerbd/rados/denc"
)

// Image metadata (key/value pairs kept in the header's omap under
// "metadata_<key>").

// MetadataSet is rbd.metadata_set.
func MetadataSet(kv map[string][]byte) Method {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return rbd("metadata_set", args(func(e *denc.Encoder) {
		denc.PutMap(e, kv, keys, func(e *denc.Encoder, k string, v []byte) { e.String(k); e.Blob(v) })
	}))
}

// MetadataRemove is rbd.metadata_remove.
func MetadataRemove(key string) Method {
	return rbd("metadata_remove", args(func(e *denc.Encoder) { e.String(key) }))
}

// MetadataGet is rbd.metadata_get; its reply is one string (DecodeString).
func MetadataGet(key string) Method {
	return rbd("metadata_get", args(func(e *denc.Encoder) { e.String(key) }))
}

// MetadataList is rbd.metadata_list: up to max pairs after start.
func MetadataList(start string, max uint64) Method {
	return rbd("metadata_list", args(func(e *denc.Encoder) { e.String(start); e.U64(max) }))
}

// KeyValue is one metadata pair.
type KeyValue struct {
	Key   string
	Value []byte
}

// DecodeMetadataList parses metadata_list's reply, in key order.
func DecodeMetadataList(out []byte) (pairs []KeyValue, err error) {
	err = reply("metadata_list", out, func(d *denc.Decoder) {
		pairs = denc.List(d, "metadata", 8, func(d *denc.Decoder) KeyValue {
			return KeyValue{Key: d.String("key"), Value: d.BlobCopy("value")}
		})
	})
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Key < pairs[j].Key })
	return
}
