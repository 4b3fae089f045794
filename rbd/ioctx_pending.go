package rbd

// IOContext is the RADOS I/O context images live in. Until the public
// rados package lands this is an interface the tests implement; it
// becomes *rados.IOContext then.
type IOContext interface {
	rbdObjects() objects
}

func adapt(ioc IOContext) (objects, error) { return ioc.rbdObjects(), nil }
