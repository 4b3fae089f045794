package osdc

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/osdmap"
)

// ListPage lists up to max objects of a pool (namespace ns, or every
// namespace with AllNamespaces) from cursor on, in the OSDs' hash order,
// one placement group after the other. Start with MinHObject(); the
// returned cursor continues the listing and is the maximum object
// (Max) at the end of the pool. Objects created or removed while listing
// may or may not be seen, as with librados.
func (o *Objecter) ListPage(ctx context.Context, pool int64, ns string, cursor HObject, max int) ([]ListEntry, HObject, error) {
	if max <= 0 {
		max = 1000
	}
	var out []ListEntry
	for !cursor.Max && len(out) < max {
		m := o.osdmap.Load()
		if m == nil {
			if err := o.WaitForMap(ctx, 1); err != nil {
				return out, cursor, err
			}
			continue
		}
		p := m.Pool(pool)
		if p == nil {
			return out, cursor, fmt.Errorf("%w: %d", ErrPoolNotFound, pool)
		}
		seed := osdmap.StableMod(cursor.Hash, p.PGNum, p.PGNumMask())
		req := &Request{
			Pool:      pool,
			Namespace: ns,
			PG:        &denc.PG{Pool: uint64(pool), Seed: seed},
			Ops:       []OSDOp{PGNLS(uint64(max-len(out)), cursor, m.Epoch)},
		}
		rep, err := o.Do(ctx, req)
		if err != nil {
			return out, cursor, err
		}
		next, entries, err := ParseNLSResponse(rep.Ops[0].OutData)
		if err != nil {
			return out, cursor, err
		}
		out = append(out, entries...)
		if next.Compare(cursor) <= 0 && !next.Max {
			return out, cursor, fmt.Errorf("osdc: listing pg %d.%x did not advance (cursor %s)", pool, seed, cursor)
		}
		cursor = next
	}
	return out, cursor, nil
}
