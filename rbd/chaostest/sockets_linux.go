package chaostest

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Connection cuts: the OSD and monitor addresses a client uses come from
// the maps, so a fault-injecting proxy cannot sit between them. Instead
// the chaos run finds its own process's TCP sockets to a peer (through
// /proc) and shuts them down with shutdown(2): to the client it is a
// connection reset by the network, and nothing else in the process is
// touched.

// ownSockets returns this process's established TCP connections whose
// remote end is one of peers, as file descriptor -> remote address.
func ownSockets(peers []netip.AddrPort) (map[int]netip.AddrPort, error) {
	want := map[netip.AddrPort]bool{}
	for _, p := range peers {
		want[p] = true
	}
	byInode := map[uint64]netip.AddrPort{}
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		if err := scanTCP(f, want, byInode); err != nil {
			return nil, err
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("listing own descriptors: %w", err)
	}
	out := map[int]netip.AddrPort{}
	for _, e := range fds {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
		if err != nil {
			continue
		}
		if ap, ok := byInode[ino]; ok {
			fd, _ := strconv.Atoi(e.Name())
			out[fd] = ap
		}
	}
	return out, nil
}

// scanTCP reads one /proc/net/tcp table and records the inodes of the
// established connections to a wanted peer.
func scanTCP(path string, want map[netip.AddrPort]bool, byInode map[uint64]netip.AddrPort) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "01" { // TCP_ESTABLISHED
			continue
		}
		remote, ok := parseProcAddr(fields[2])
		if !ok || !want[remote] {
			continue
		}
		ino, err := strconv.ParseUint(fields[9], 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		byInode[ino] = remote
	}
	return sc.Err()
}

// parseProcAddr decodes "0100007F:1A0A" (address in host byte order per
// 32-bit word, port in hex) from /proc/net/tcp{,6}.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(raw); i += 4 { // each 32-bit word is little-endian
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(p)), true
}

// cutSockets shuts down both directions of this process's connections to
// peers and returns how many it cut.
func cutSockets(peers []netip.AddrPort) (int, error) {
	socks, err := ownSockets(peers)
	if err != nil {
		return 0, err
	}
	n := 0
	for fd := range socks {
		// the descriptor may have been closed and reused since the scan:
		// cut it only if it is still a TCP socket to the same peer
		sa, err := unix.Getpeername(fd)
		if err != nil || !samePeer(sa, socks[fd]) {
			continue
		}
		if unix.Shutdown(fd, unix.SHUT_RDWR) == nil {
			n++
		}
	}
	return n, nil
}

func samePeer(sa unix.Sockaddr, ap netip.AddrPort) bool {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(a.Addr) == ap.Addr() && uint16(a.Port) == ap.Port()
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(a.Addr).Unmap() == ap.Addr() && uint16(a.Port) == ap.Port()
	}
	return false
}

// peerCounts counts this process's connections to each of peers.
func peerCounts(peers []netip.AddrPort) (map[netip.AddrPort]int, error) {
	socks, err := ownSockets(peers)
	if err != nil {
		return nil, err
	}
	out := map[netip.AddrPort]int{}
	for _, ap := range socks {
		out[ap]++
	}
	return out, nil
}
