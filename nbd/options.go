package nbd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// infoRequest is the data of NBD_OPT_INFO and NBD_OPT_GO.
type infoRequest struct {
	name            string
	wantName        bool
	wantDescription bool
	wantBlockSize   bool
}

// parseInfoRequest decodes: name length (32 bits), name, number of
// information requests (16 bits), the requests (16 bits each).
func parseInfoRequest(d []byte) (infoRequest, error) {
	var r infoRequest
	if len(d) < 6 {
		return r, fmt.Errorf("option data of %d bytes is shorter than 6", len(d))
	}
	n := binary.BigEndian.Uint32(d)
	if uint64(n) > uint64(len(d)-6) {
		return r, fmt.Errorf("export name length %d overruns the option", n)
	}
	if n > maxStringLen {
		return r, fmt.Errorf("export name of %d bytes is over %d", n, maxStringLen)
	}
	r.name = string(d[4 : 4+n])
	rest := d[4+n:]
	count := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != 2*count {
		return r, fmt.Errorf("%d information requests need %d bytes, option has %d", count, 2*count, len(rest))
	}
	for i := 0; i < count; i++ {
		switch binary.BigEndian.Uint16(rest[2*i:]) {
		case infoName:
			r.wantName = true
		case infoDescription:
			r.wantDescription = true
		case infoBlockSize:
			r.wantBlockSize = true
		}
	}
	return r, nil
}

// metaContextRequest is the data of NBD_OPT_LIST_META_CONTEXT and
// NBD_OPT_SET_META_CONTEXT.
type metaContextRequest struct {
	export  string
	queries []string
}

// parseMetaContextRequest decodes: export name length (32 bits), name,
// number of queries (32 bits), then each query as length (32 bits) and
// string. Every query must name its namespace ("ns:...").
func parseMetaContextRequest(d []byte) (metaContextRequest, error) {
	var r metaContextRequest
	name, d, err := takeString(d, "export name")
	if err != nil {
		return r, err
	}
	r.export = name
	if len(d) < 4 {
		return r, errors.New("option ends before the number of queries")
	}
	n := binary.BigEndian.Uint32(d)
	d = d[4:]
	if uint64(n)*4 > uint64(len(d)) {
		return r, fmt.Errorf("%d queries cannot fit in %d bytes", n, len(d))
	}
	for i := uint32(0); i < n; i++ {
		var q string
		q, d, err = takeString(d, "query")
		if err != nil {
			return r, err
		}
		if !strings.Contains(q, ":") {
			return r, fmt.Errorf("query %q has no namespace", q)
		}
		r.queries = append(r.queries, q)
	}
	if len(d) != 0 {
		return r, fmt.Errorf("%d bytes after the last query", len(d))
	}
	return r, nil
}

// metaContext is a metadata context an export offers: its id and name,
// and for a dirty bitmap the bitmap's name.
type metaContext struct {
	id     uint32
	name   string
	bitmap string
}

// exportContexts lists the contexts exp offers: base:allocation, then a
// qemu:dirty-bitmap: context for each of its backend's bitmaps. Bitmaps
// the backend cannot list now are left out, and said so.
func exportContexts(ctx context.Context, exp *exportState, log *slog.Logger) []metaContext {
	out := []metaContext{{id: metaContextBaseAllocation, name: baseAllocation}}
	if d := exp.caps.dirty; d != nil {
		names, err := d.DirtyBitmaps(ctx)
		if err != nil {
			log.Warn("nbd: listing dirty bitmaps; offering none", "export", exp.Name, "err", err)
		}
		for i, b := range names {
			out = append(out, metaContext{id: metaContextBaseAllocation + 1 + uint32(i), name: qemuDirtyBitmap + b, bitmap: b})
		}
	}
	return out
}

// matchContexts picks the contexts of avail that queries ask for: SET
// takes exact names; LIST also takes a query ending in ':' ("base:",
// "qemu:", "qemu:dirty-bitmap:") as every context it prefixes, and no
// query as every context.
func matchContexts(avail []metaContext, queries []string, list bool) []metaContext {
	if list && len(queries) == 0 {
		return avail
	}
	var out []metaContext
	seen := map[uint32]bool{}
	for _, q := range queries {
		for _, c := range avail {
			if seen[c.id] {
				continue
			}
			if c.name == q || list && strings.HasSuffix(q, ":") && strings.HasPrefix(c.name, q) {
				seen[c.id] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// takeString splits a 32-bit length-prefixed string off d.
func takeString(d []byte, what string) (string, []byte, error) {
	if len(d) < 4 {
		return "", nil, fmt.Errorf("option ends before the %s length", what)
	}
	n := binary.BigEndian.Uint32(d)
	d = d[4:]
	if uint64(n) > uint64(len(d)) {
		return "", nil, fmt.Errorf("%s length %d overruns the option", what, n)
	}
	if n > maxStringLen {
		return "", nil, fmt.Errorf("%s of %d bytes is over %d", what, n, maxStringLen)
	}
	return string(d[:n]), d[n:], nil
}
