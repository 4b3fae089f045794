package rados

import (
	"github.com/purerbd/purerbd/rados/monc"
	"github.com/purerbd/purerbd/rados/osdc"
)

// ConnStats describes a connection's sessions for monitoring: the
// monitor session and the objecter's counters.
type ConnStats struct {
	Mon monc.SessionInfo
	OSD osdc.Stats
}

// Stats returns the connection's session state and counters.
func (c *Conn) Stats() ConnStats {
	return ConnStats{Mon: c.mc.Session(), OSD: c.ob.Stats()}
}
