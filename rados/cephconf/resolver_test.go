package cephconf

import (
	"context"
	"net"
	"net/netip"
)

// netResolver resolves through the system resolver (only "localhost" is
// used in tests: no traffic leaves the machine).
type netResolver struct{}

func (netResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}
