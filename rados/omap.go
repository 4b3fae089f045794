package rados

import (
	"context"
	"iter"

	"github.com/purerbd/purerbd/rados/osdc"
)

// KeyValue is one omap entry.
type KeyValue = osdc.KeyValue

// omapPage is how many entries the iterators fetch per request.
const omapPage = 1000

// OmapGetVals returns up to max omap entries (in key order) after
// startAfter whose keys start with prefix, and whether more follow.
func (io *IOContext) OmapGetVals(ctx context.Context, oid, startAfter, prefix string, max int) ([]KeyValue, bool, error) {
	rep, err := io.do(ctx, oid, 0, osdc.OmapGetVals(startAfter, prefix, uint64(max)))
	if err != nil {
		return nil, false, err
	}
	return osdc.ParseOmapVals(rep.Ops[0].OutData)
}

// OmapGetKeys returns up to max omap keys after startAfter, and whether
// more follow.
func (io *IOContext) OmapGetKeys(ctx context.Context, oid, startAfter string, max int) ([]string, bool, error) {
	rep, err := io.do(ctx, oid, 0, osdc.OmapGetKeys(startAfter, uint64(max)))
	if err != nil {
		return nil, false, err
	}
	return osdc.ParseOmapKeys(rep.Ops[0].OutData)
}

// OmapGetValsByKeys returns the entries for the given keys; keys the
// object does not have are left out.
func (io *IOContext) OmapGetValsByKeys(ctx context.Context, oid string, keys []string) (map[string][]byte, error) {
	rep, err := io.do(ctx, oid, 0, osdc.OmapGetValsByKeys(keys))
	if err != nil {
		return nil, err
	}
	kvs, _, err := osdc.ParseOmapVals(rep.Ops[0].OutData)
	if err != nil {
		return nil, err
	}
	m := make(map[string][]byte, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m, nil
}

// Omap iterates over the object's omap entries whose keys start with
// prefix, in key order, fetching them a page at a time. Iteration stops
// at the first error, which is yielded.
func (io *IOContext) Omap(ctx context.Context, oid, prefix string) iter.Seq2[KeyValue, error] {
	return func(yield func(KeyValue, error) bool) {
		after := ""
		for {
			kvs, more, err := io.OmapGetVals(ctx, oid, after, prefix, omapPage)
			if err != nil {
				yield(KeyValue{}, err)
				return
			}
			for _, kv := range kvs {
				if !yield(kv, nil) {
					return
				}
			}
			if !more || len(kvs) == 0 {
				return
			}
			after = kvs[len(kvs)-1].Key
		}
	}
}

// OmapGetAll returns every omap entry whose key starts with prefix.
func (io *IOContext) OmapGetAll(ctx context.Context, oid, prefix string) (map[string][]byte, error) {
	m := map[string][]byte{}
	for kv, err := range io.Omap(ctx, oid, prefix) {
		if err != nil {
			return nil, err
		}
		m[kv.Key] = kv.Value
	}
	return m, nil
}

// OmapSet sets omap entries (creating the object).
func (io *IOContext) OmapSet(ctx context.Context, oid string, kv map[string][]byte) error {
	_, err := io.do(ctx, oid, 0, osdc.OmapSetVals(kv))
	return err
}

// OmapRm removes omap entries.
func (io *IOContext) OmapRm(ctx context.Context, oid string, keys []string) error {
	_, err := io.do(ctx, oid, 0, osdc.OmapRmKeys(keys))
	return err
}

// OmapClear removes every omap entry.
func (io *IOContext) OmapClear(ctx context.Context, oid string) error {
	_, err := io.do(ctx, oid, 0, osdc.OmapClear())
	return err
}

// OmapGetHeader returns the omap header.
func (io *IOContext) OmapGetHeader(ctx context.Context, oid string) ([]byte, error) {
	rep, err := io.do(ctx, oid, 0, osdc.OmapGetHeader())
	if err != nil {
		return nil, err
	}
	return rep.Ops[0].OutData, nil
}

// OmapSetHeader sets the omap header.
func (io *IOContext) OmapSetHeader(ctx context.Context, oid string, header []byte) error {
	_, err := io.do(ctx, oid, 0, osdc.OmapSetHeader(header))
	return err
}
