package rados

import (
	"context"
	"iter"

	"github.com/purerbd/purerbd/rados/osdc"
)

// Object names an object found by listing.
type Object struct {
	Namespace string
	Name      string
	Locator   string // the locator key, if the object has one
}

// ListCursor is a position in a pool listing.
type ListCursor = osdc.HObject

// listPage is how many objects Objects fetches per request.
const listPage = 1000

// ListPage returns up to max objects from cursor on (start with
// ListStart()), and the cursor to continue from; the listing is
// complete when that cursor's Max is true. The context's namespace
// selects the objects (AllNamespaces for every one).
func (io *IOContext) ListPage(ctx context.Context, cursor ListCursor, max int) ([]Object, ListCursor, error) {
	ctx, cancel := io.conn.opContext(ctx)
	defer cancel()
	es, next, err := io.conn.ob.ListPage(ctx, io.pool, io.ns, cursor, max)
	out := make([]Object, len(es))
	for i, e := range es {
		out[i] = Object{Namespace: e.Namespace, Name: e.OID, Locator: e.Locator}
	}
	return out, next, err
}

// ListStart returns the cursor at the start of a pool.
func ListStart() ListCursor { return osdc.MinHObject() }

// Objects iterates over the objects of the pool (in the context's
// namespace, or every namespace with AllNamespaces), in the OSDs' hash
// order. Iteration stops at the first error, which is yielded.
func (io *IOContext) Objects(ctx context.Context) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		cur := ListStart()
		for !cur.Max {
			objs, next, err := io.ListPage(ctx, cur, listPage)
			for _, o := range objs {
				if !yield(o, nil) {
					return
				}
			}
			if err != nil {
				yield(Object{}, err)
				return
			}
			cur = next
		}
	}
}
