// Package cls holds the encodings RBD exchanges with the OSDs' object
// classes: the arguments and replies of the `rbd` class methods that live
// on an image's header, id, directory and object-map objects, the `lock`
// class that implements advisory locks, and the on-disk types those
// methods keep (parent and child specs, snapshot records and namespaces).
//
// Every method is described by a Method value (class, method, input
// bytes) that the caller hands to an I/O context's Exec, and, where the
// method answers, a Decode function that parses the reply. Decoders
// never panic on malformed input: a reply that does not parse yields an
// error wrapping ErrBadReply.
package cls

import (
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// NoSnap is CEPH_NOSNAP, the snapshot id that names an image's head.
const NoSnap uint64 = 0xfffffffffffffffe

// ErrBadReply is wrapped by every error that reports a reply which does
// not decode.
var ErrBadReply = errors.New("cls: malformed reply")

// Method is one object-class call: class name, method name and input.
type Method struct {
	Class string
	Name  string
	In    []byte
}

// String names the method as Ceph logs do ("rbd.get_size").
func (m Method) String() string { return m.Class + "." + m.Name }

func rbd(name string, in []byte) Method { return Method{Class: "rbd", Name: name, In: in} }

// args builds an input buffer with an encoder callback.
func args(f func(e *denc.Encoder)) []byte {
	e := denc.NewEncoder(nil)
	f(e)
	return e.Bytes()
}

// reply decodes out with f, requiring that every byte is used.
func reply(method string, out []byte, f func(d *denc.Decoder)) error {
	d := denc.NewDecoder(out)
	f(d)
	d.End(method + " reply")
	if err := d.Err(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadReply, method, err)
	}
	return nil
}

func str(d *denc.Decoder) string       { return d.String("string") }
func putStr(e *denc.Encoder, s string) { e.String(s) }
