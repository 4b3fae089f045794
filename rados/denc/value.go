package denc

// Decodable is implemented by pointers to the types in this package (and
// any type elsewhere) that decode themselves from a Decoder.
type Decodable[T any] interface {
	*T
	Decode(d *Decoder)
}

// Encodable is implemented by types that encode themselves.
type Encodable interface {
	Encode(e *Encoder)
}

// Get decodes one T, for use with List, Map and Optional:
//
//	addrs := denc.List(d, "addrs", 9, denc.Get[denc.EntityAddr])
func Get[T any, P Decodable[T]](d *Decoder) T {
	var v T
	P(&v).Decode(d)
	return v
}

// Put encodes v, for use with PutList and PutMap.
func Put[T Encodable](e *Encoder, v T) { v.Encode(e) }

// Unmarshal decodes b as exactly one T: trailing bytes are an error.
func Unmarshal[T any, P Decodable[T]](b []byte) (T, error) {
	d := NewDecoder(b)
	v := Get[T, P](d)
	d.End("trailing bytes")
	if err := d.Err(); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// Marshal encodes v into a fresh byte slice.
func Marshal[T Encodable](v T) []byte {
	e := NewEncoder(nil)
	v.Encode(e)
	return e.Bytes()
}
