//go:build !unix

package rawsock

// iovec is never used here: sockets go through net.Conn.
type iovec struct{}

func newIovec([]byte) iovec { return iovec{} }
