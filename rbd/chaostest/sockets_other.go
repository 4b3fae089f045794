//go:build !linux

package chaostest

import (
	"errors"
	"net/netip"
)

var errNoProc = errors.New("connection cuts need Linux's /proc")

func cutSockets([]netip.AddrPort) (int, error) { return 0, errNoProc }

func peerCounts([]netip.AddrPort) (map[netip.AddrPort]int, error) { return nil, errNoProc }
