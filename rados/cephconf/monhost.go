package cephconf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Well-known monitor ports.
const (
	MonPortMsgr2  = 3300 // IANA port, msgr2
	MonPortLegacy = 6789 // msgr1
)

// MonAddr is one monitor endpoint a msgr2 client can dial.
type MonAddr struct {
	Addr netip.AddrPort // msgr2 address to dial
	// Token is the piece of mon_host this address came from.
	Token string
	// FromLegacy is set when mon_host named only an msgr1 address (v1:
	// prefix, or an untyped address on port 6789) and the client dials
	// the msgr2 port on the same host instead, as Ceph's own clients do.
	FromLegacy bool
}

func (m MonAddr) String() string { return m.Addr.String() }

// Resolver resolves host names in mon_host. net.DefaultResolver fits.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ErrNoMons is returned when mon_host names no monitor.
var ErrNoMons = errors.New("cephconf: no monitor addresses")

// ParseMonHost parses a mon_host value in any of the forms Ceph accepts:
// addrvecs "[v2:1.2.3.4:3300,v1:1.2.3.4:6789]", typed addresses
// "v2:1.2.3.4:3300", untyped "1.2.3.4:6789" or "1.2.3.4", IPv6
// "[::1]:3300", host names "mon1" or "mon1:6789", separated by commas,
// semicolons or spaces. Each monitor yields one msgr2 address; host names
// resolving to several IPs yield one per IP. res may be nil when the
// value holds no host names.
func ParseMonHost(ctx context.Context, s string, res Resolver) ([]MonAddr, error) {
	toks, err := splitMonHost(s)
	if err != nil {
		return nil, err
	}
	var out []MonAddr
	seen := map[netip.AddrPort]bool{}
	for _, tok := range toks {
		addrs, err := parseMonToken(ctx, tok, res)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if !seen[a.Addr] {
				seen[a.Addr] = true
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w in %q", ErrNoMons, clip(s))
	}
	return out, nil
}

// splitMonHost splits on separators outside brackets.
func splitMonHost(s string) ([]string, error) {
	var toks []string
	depth, start := 0, 0
	flush := func(i int) {
		if t := strings.TrimSpace(s[start:i]); t != "" {
			toks = append(toks, t)
		}
		start = i + 1
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("cephconf: mon_host %q: unbalanced ']'", clip(s))
			}
		case ',', ';', ' ', '\t':
			if depth == 0 {
				flush(i)
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("cephconf: mon_host %q: unbalanced '['", clip(s))
	}
	flush(len(s))
	return toks, nil
}

func isTyped(s string) bool {
	return strings.HasPrefix(s, "v1:") || strings.HasPrefix(s, "v2:") || strings.HasPrefix(s, "any:")
}

func parseMonToken(ctx context.Context, tok string, res Resolver) ([]MonAddr, error) {
	if strings.HasPrefix(tok, "[") && strings.HasSuffix(tok, "]") && isTyped(tok[1:]) {
		return parseAddrvec(ctx, tok, res)
	}
	typ := ""
	rest := tok
	if isTyped(tok) {
		i := strings.IndexByte(tok, ':')
		typ, rest = tok[:i], tok[i+1:]
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 { // nonce
		rest = rest[:i]
	}
	host, port, err := splitHostPort(rest)
	if err != nil {
		return nil, fmt.Errorf("cephconf: mon_host entry %q: %w", clip(tok), err)
	}
	ips, err := resolve(ctx, host, res)
	if err != nil {
		return nil, fmt.Errorf("cephconf: mon_host entry %q: %w", clip(tok), err)
	}
	dial, legacy := msgr2Port(typ, port)
	out := make([]MonAddr, 0, len(ips))
	for _, ip := range ips {
		out = append(out, MonAddr{Addr: netip.AddrPortFrom(ip, dial), Token: tok, FromLegacy: legacy})
	}
	return out, nil
}

// msgr2Port decides which port a msgr2 client dials for a mon_host entry,
// following Ceph's rules for ambiguous addresses: untyped port 6789 means
// msgr1, so the mon's msgr2 port 3300 is used; no port means 3300; any
// other untyped port is taken as msgr2.
func msgr2Port(typ string, port uint16) (uint16, bool) {
	switch {
	case typ == "v1":
		return MonPortMsgr2, true
	case port == 0:
		return MonPortMsgr2, false
	case typ == "" && port == MonPortLegacy:
		return MonPortMsgr2, true
	default:
		return port, false
	}
}

// parseAddrvec parses "[v2:ip:port,v1:ip:port]": the v2 entry when there
// is one, else the v1 entry mapped to msgr2.
func parseAddrvec(ctx context.Context, tok string, res Resolver) ([]MonAddr, error) {
	inner := tok[1 : len(tok)-1]
	parts, err := splitMonHost(inner)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if !isTyped(p) {
			return nil, fmt.Errorf("cephconf: mon_host entry %q: untyped address %q inside an address vector", clip(tok), clip(p))
		}
	}
	var v1 []MonAddr
	for _, p := range parts {
		a, err := parseMonToken(ctx, p, res)
		if err != nil {
			return nil, err
		}
		for i := range a {
			a[i].Token = tok
		}
		if strings.HasPrefix(p, "v1:") {
			v1 = append(v1, a...)
			continue
		}
		return a, nil
	}
	return v1, nil
}

// splitHostPort accepts "host", "host:port", "[v6]", "[v6]:port" and a
// bare IPv6 address.
func splitHostPort(s string) (string, uint16, error) {
	if s == "" {
		return "", 0, errors.New("empty address")
	}
	if ip, err := netip.ParseAddr(s); err == nil { // bare IPv4 or IPv6
		return ip.String(), 0, nil
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return s[1 : len(s)-1], 0, nil
	}
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(s, ":") {
			return "", 0, err
		}
		return s, 0, nil // host name without port
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("bad port %q", clip(ps))
	}
	return host, uint16(p), nil
}

func resolve(ctx context.Context, host string, res Resolver) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	if res == nil {
		return nil, fmt.Errorf("host name %q and no resolver", clip(host))
	}
	ips, err := res.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolving %q: %w", clip(host), err)
	}
	out := make([]netip.Addr, len(ips))
	for i, ip := range ips {
		out[i] = ip.Unmap()
	}
	return out, nil
}

// clip shortens text quoted in an error: a mon_host of kilobytes must not
// make each error that names it, quoted and wrapped, cost many times its
// size.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
