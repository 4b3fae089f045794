package rados

import (
	"context"
	"sync"
	"time"

	"github.com/purerbd/purerbd/rados/monc"
)

// mapRequestTimeout bounds one request for a full OSD map.
const mapRequestTimeout = 15 * time.Second

// monMaps lets the objecter ask the monitor client for OSD maps. The
// monitors push every new epoch through the subscription; a request is
// only needed when the objecter finds a gap or learns of a newer epoch
// from an OSD, and then the newest full map is fetched (one request at a
// time).
type monMaps struct {
	mc     *monc.Client
	ctx    context.Context // ends with the Conn
	wg     *sync.WaitGroup
	mu     sync.Mutex
	flight bool
}

func (m *monMaps) RequestOSDMap(have uint32) {
	m.mu.Lock()
	if m.flight || m.ctx.Err() != nil {
		m.mu.Unlock()
		return
	}
	m.flight = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer func() {
			m.mu.Lock()
			m.flight = false
			m.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(m.ctx, mapRequestTimeout)
		defer cancel()
		newest, _, err := m.mc.GetVersion(ctx, "osdmap")
		if err != nil || uint32(newest) <= have {
			return
		}
		// The full map reaches the objecter through the subscription.
		_, _ = m.mc.RequestOSDMap(ctx, uint32(newest))
	}()
}

func (m *monMaps) LatestOSDMapEpoch(ctx context.Context) (uint32, error) {
	n, _, err := m.mc.GetVersion(ctx, "osdmap")
	return uint32(n), err
}
