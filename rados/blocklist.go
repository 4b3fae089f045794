package rados

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// ClientAddr returns this client's address as the cluster records it
// for its locks and watches (`rados lock info`, `rados listwatchers`):
// the IP the monitors see, no port, the connection's nonce, which its
// monitor and OSD sessions share. A successor that knows this address
// of a dead predecessor can fence exactly that instance (Blocklist).
func (c *Conn) ClientAddr() denc.EntityAddr { return c.mc.Addr() }

// Blocklist adds addr to the OSD blocklist for expire (0: the
// monitors' default, an hour), as `ceph osd blocklist add` does, and
// returns once this client holds the OSD map that carries it: from then
// on an OSD that serves one of this client's operations refuses every
// operation of addr, so nothing addr sent can land after what this
// client writes next. The address is taken exactly, nonce included: a
// blocklisted instance of a process never matches its successor.
func (c *Conn) Blocklist(ctx context.Context, addr denc.EntityAddr, expire time.Duration) error {
	a := addr
	a.Type = denc.AddrAny // the monitors take the legacy "IP:port/nonce" form
	cmd := map[string]any{"prefix": "osd blocklist", "blocklistop": "add", "addr": a.String()}
	if expire > 0 {
		cmd["expire"] = expire.Seconds()
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, _, err := c.MonCommand(ctx, b); err != nil {
		return fmt.Errorf("rados: blocklisting %s: %w", a, err)
	}
	return c.WaitForLatestOSDMap(ctx)
}
