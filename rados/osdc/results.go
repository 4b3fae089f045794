package osdc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// The parsers below decode the OutData of single operations.

func parseErr(what string, d *denc.Decoder) error {
	if err := d.Err(); err != nil {
		return fmt.Errorf("osdc: %s reply: %w", what, err)
	}
	return nil
}

// ParseStat decodes a stat result: size and modification time.
func ParseStat(out []byte) (size uint64, mtime denc.UTime, err error) {
	d := denc.NewDecoder(out)
	size = d.U64("stat size")
	mtime.Decode(d)
	return size, mtime, parseErr("stat", d)
}

// KeyValue is one omap entry or extended attribute.
type KeyValue struct {
	Key   string
	Value []byte
}

// ParseOmapVals decodes an omap-get-vals or omap-get-vals-by-keys result:
// the entries in key order and whether more follow (newer OSDs say so;
// for older ones more is false).
func ParseOmapVals(out []byte) (kvs []KeyValue, more bool, err error) {
	d := denc.NewDecoder(out)
	kvs = denc.List(d, "omap entries", 8, func(d *denc.Decoder) KeyValue {
		return KeyValue{Key: d.String("omap key"), Value: d.BlobCopy("omap value")}
	})
	if d.Remaining() > 0 {
		more = d.Bool("omap more")
	}
	return kvs, more, parseErr("omap", d)
}

// ParseOmapKeys decodes an omap-get-keys result.
func ParseOmapKeys(out []byte) (keys []string, more bool, err error) {
	d := denc.NewDecoder(out)
	keys = denc.List(d, "omap keys", 4, func(d *denc.Decoder) string { return d.String("omap key") })
	if d.Remaining() > 0 {
		more = d.Bool("omap more")
	}
	return keys, more, parseErr("omap keys", d)
}

// ParseXattrs decodes a getxattrs result.
func ParseXattrs(out []byte) (map[string][]byte, error) {
	d := denc.NewDecoder(out)
	m := denc.Map(d, "xattrs", 8, func(d *denc.Decoder) (string, []byte) {
		return d.String("xattr name"), d.BlobCopy("xattr value")
	})
	return m, parseErr("getxattrs", d)
}

// Extent is a byte range of an object.
type Extent struct {
	Offset, Length uint64
}

// ParseSparseRead decodes a sparse-read result: the allocated extents and
// their data, laid end to end.
func ParseSparseRead(out []byte) (extents []Extent, data []byte, err error) {
	d := denc.NewDecoder(out)
	extents = denc.List(d, "sparse-read extents", 16, func(d *denc.Decoder) Extent {
		return Extent{Offset: d.U64("extent offset"), Length: d.U64("extent length")}
	})
	data = d.Blob("sparse-read data")
	if err := parseErr("sparse-read", d); err != nil {
		return nil, nil, err
	}
	var total uint64
	for _, e := range extents {
		total += e.Length
	}
	if total != uint64(len(data)) {
		return nil, nil, fmt.Errorf("osdc: sparse-read reply: extents cover %d bytes, data has %d", total, len(data))
	}
	return extents, data, nil
}

// ListEntry is one object returned by listing.
type ListEntry struct {
	Namespace string
	OID       string
	Locator   string
}

// ParseNLSResponse decodes a pgnls result (pg_nls_response_t): the
// cursor to continue from (the maximum object at the end of the pool) and
// the objects.
func ParseNLSResponse(out []byte) (next HObject, entries []ListEntry, err error) {
	d := denc.NewDecoder(out)
	d.Versioned("pg_nls_response_t", 1, func(d *denc.Decoder, _ uint8) {
		next.Decode(d)
		entries = denc.List(d, "pg_nls_response_t entries", 12, func(d *denc.Decoder) ListEntry {
			return ListEntry{
				Namespace: d.String("entry nspace"),
				OID:       d.String("entry oid"),
				Locator:   d.String("entry locator"),
			}
		})
	})
	return next, entries, parseErr("pgnls", d)
}

// ParseNotifyID decodes the notify id a notify operation returns.
func ParseNotifyID(out []byte) (uint64, error) {
	d := denc.NewDecoder(out)
	id := d.U64("notify id")
	return id, parseErr("notify", d)
}

// WatcherID names one watch: the watcher's global id and its cookie.
type WatcherID struct {
	GID    uint64
	Cookie uint64
}

// NotifyReply is one watcher's answer to a notify.
type NotifyReply struct {
	WatcherID
	Reply []byte
}

// DecodeNotifyAcks decodes the payload of a NOTIFY_COMPLETE event: the
// watchers that acknowledged (with their replies) and those that timed
// out.
func DecodeNotifyAcks(payload []byte) (acks []NotifyReply, timedOut []WatcherID, err error) {
	if len(payload) == 0 {
		return nil, nil, nil
	}
	d := denc.NewDecoder(payload)
	acks = denc.List(d, "notify acks", 20, func(d *denc.Decoder) NotifyReply {
		return NotifyReply{
			WatcherID: WatcherID{GID: d.U64("ack gid"), Cookie: d.U64("ack cookie")},
			Reply:     d.BlobCopy("ack reply"),
		}
	})
	if d.Remaining() > 0 {
		timedOut = denc.List(d, "notify timeouts", 16, func(d *denc.Decoder) WatcherID {
			return WatcherID{GID: d.U64("timeout gid"), Cookie: d.U64("timeout cookie")}
		})
	}
	return acks, timedOut, parseErr("notify completion", d)
}

// Watcher is one watch on an object, as list-watchers reports it.
type Watcher struct {
	Name           denc.EntityName
	Cookie         uint64
	TimeoutSeconds uint32
	Addr           denc.EntityAddr
}

// ParseWatchers decodes a list-watchers result.
func ParseWatchers(out []byte) ([]Watcher, error) {
	d := denc.NewDecoder(out)
	var ws []Watcher
	d.Versioned("obj_list_watch_response_t", 1, func(d *denc.Decoder, _ uint8) {
		ws = denc.List(d, "watchers", 6, func(d *denc.Decoder) Watcher {
			var w Watcher
			d.Versioned("watch_item_t", 1, func(d *denc.Decoder, v uint8) {
				w.Name.Decode(d)
				w.Cookie = d.U64("watch cookie")
				w.TimeoutSeconds = d.U32("watch timeout")
				if v >= 2 {
					w.Addr.Decode(d)
				}
			})
			return w
		})
	})
	return ws, parseErr("list-watchers", d)
}
