package chaostest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// The kinds of fault a run injects.
const (
	FaultOSDKill      = "osd-kill"      // SIGKILL an OSD, restart it later
	FaultOSDOut       = "osd-out"       // ceph osd out, later in
	FaultOSDPause     = "osd-pause"     // SIGSTOP an OSD for longer than the op timeout, then SIGCONT
	FaultOSDCut       = "osd-cut"       // cut the client's connections to one OSD
	FaultMonKill      = "mon-kill"      // SIGKILL a mon (often the one the client uses), restart it later
	FaultMonCut       = "mon-cut"       // cut the client's connections to the monitors
	FaultPGNum        = "pg-num"        // change the pool's pg_num (split or merge)
	FaultNBDKill      = "nbd-kill"      // kill the NBD server; a new one serves the same socket
	FaultSlowConsumer = "slow-consumer" // an NBD client connection stops reading replies for a while
)

// AllFaults lists every kind, in the order of the report.
var AllFaults = []string{FaultOSDKill, FaultOSDOut, FaultOSDPause, FaultOSDCut,
	FaultMonKill, FaultMonCut, FaultPGNum, FaultNBDKill, FaultSlowConsumer}

// fault is one scheduled fault.
type fault struct {
	kind   string
	target int           // OSD id, mon index (-1: the mon the client uses), NBD connection
	hold   time.Duration // how long the fault lasts before it is healed
	gap    time.Duration // quiet time after healing
}

// schedule draws faults from the seed: every enabled kind once per round,
// rounds in a shuffled order, targets and durations at random.
type schedule struct {
	rng       *rand.Rand
	kinds     []string
	round     []string
	osds      int
	mons      int
	opTimeout time.Duration
	gap       [2]time.Duration
}

func newSchedule(seed uint64, kinds []string, osds, mons int, opTimeout time.Duration, gap [2]time.Duration) *schedule {
	return &schedule{rng: rand.New(rand.NewPCG(seed, 0xfa0175)), kinds: kinds, osds: osds, mons: mons, opTimeout: opTimeout, gap: gap}
}

func (s *schedule) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

func (s *schedule) next() fault {
	if len(s.round) == 0 {
		s.round = append([]string(nil), s.kinds...)
		s.rng.Shuffle(len(s.round), func(i, j int) { s.round[i], s.round[j] = s.round[j], s.round[i] })
	}
	f := fault{kind: s.round[0], gap: s.between(s.gap[0], s.gap[1])}
	s.round = s.round[1:]
	switch f.kind {
	case FaultOSDKill:
		f.target, f.hold = s.rng.IntN(s.osds), s.between(2*time.Second, 12*time.Second)
	case FaultOSDOut:
		f.target, f.hold = s.rng.IntN(s.osds), s.between(3*time.Second, 10*time.Second)
	case FaultOSDPause:
		f.target, f.hold = s.rng.IntN(s.osds), s.opTimeout+s.between(time.Second, 6*time.Second)
	case FaultOSDCut:
		f.target = s.rng.IntN(s.osds)
	case FaultMonKill:
		f.target, f.hold = s.rng.IntN(s.mons), s.between(2*time.Second, 10*time.Second)
		if s.rng.IntN(2) == 0 {
			f.target = -1
		}
	case FaultMonCut:
	case FaultPGNum:
	case FaultNBDKill:
		f.hold = s.between(100*time.Millisecond, 3*time.Second)
	case FaultSlowConsumer:
		f.target, f.hold = s.rng.IntN(1<<16), s.between(2*time.Second, 10*time.Second)
	}
	return f
}

// injector applies faults to the cluster and the NBD export, and heals
// them.
type injector struct {
	c      *cephcluster.Cluster
	admin  *rados.Conn   // for mon commands (faster than Ceph's CLI)
	conns  []*rados.Conn // the clients whose connections get cut
	export *nbdExport    // nil without the NBD path
	nbdc   *nbdTarget
	say    func(format string, args ...any)
	paused map[string]bool
	outs   map[int]bool
	pgNum  int
}

// inject applies f, waits out its hold time and heals it.
func (in *injector) inject(ctx context.Context, f fault) error {
	sleep := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	osd := "osd." + strconv.Itoa(f.target)
	switch f.kind {
	case FaultOSDKill:
		in.say("%s %s, restart in %v", f.kind, osd, f.hold.Round(100*time.Millisecond))
		if err := in.c.Kill(osd); err != nil {
			return err
		}
		sleep(f.hold)
		return in.c.Start(osd)
	case FaultOSDOut:
		in.say("%s %s, back in after %v", f.kind, osd, f.hold.Round(100*time.Millisecond))
		if err := in.command(ctx, nil, "prefix", "osd out", "ids", []string{strconv.Itoa(f.target)}); err != nil {
			return err
		}
		in.outs[f.target] = true
		sleep(f.hold)
		if err := in.command(ctx, nil, "prefix", "osd in", "ids", []string{strconv.Itoa(f.target)}); err != nil {
			return err
		}
		delete(in.outs, f.target)
		return nil
	case FaultOSDPause:
		in.say("%s %s (SIGSTOP) for %v", f.kind, osd, f.hold.Round(100*time.Millisecond))
		if err := in.c.Pause(osd); err != nil {
			return err
		}
		in.paused[osd] = true
		sleep(f.hold)
		delete(in.paused, osd)
		return in.c.Resume(osd)
	case FaultOSDCut:
		peers := in.osdAddrs(f.target)
		n, err := cutSockets(peers)
		in.say("%s %s: %d client connection(s) to %v cut", f.kind, osd, n, peers)
		return err
	case FaultMonKill:
		name := in.pickMon(f.target)
		in.say("%s mon.%s%s, restart in %v", f.kind, name, map[bool]string{true: " (the client's)"}[f.target < 0],
			f.hold.Round(100*time.Millisecond))
		if err := in.c.Kill("mon." + name); err != nil {
			return err
		}
		sleep(f.hold)
		return in.c.Start("mon." + name)
	case FaultMonCut:
		peers := in.monAddrs()
		n, err := cutSockets(peers)
		in.say("%s: %d client connection(s) to the mons cut", f.kind, n)
		return err
	case FaultPGNum:
		to := 32
		if in.pgNum >= 32 {
			to = 16
		}
		in.say("%s %s pg_num %d -> %d", f.kind, in.c.Pool, in.pgNum, to)
		if err := in.command(ctx, nil, "prefix", "osd pool set", "pool", in.c.Pool, "var", "pg_num", "val", strconv.Itoa(to)); err != nil {
			return err
		}
		in.pgNum = to
		return nil
	case FaultNBDKill:
		if in.export == nil {
			return nil
		}
		in.say("%s: server killed, back in %v", f.kind, f.hold.Round(100*time.Millisecond))
		in.export.kill()
		sleep(f.hold)
		return in.export.start(ctx)
	case FaultSlowConsumer:
		if in.nbdc == nil {
			return nil
		}
		slot := f.target % len(in.nbdc.slots)
		in.say("%s: NBD connection %d reads no replies for %v", f.kind, slot, f.hold.Round(100*time.Millisecond))
		in.nbdc.slowConsumer(ctx, slot, f.hold)
		return nil
	}
	return fmt.Errorf("unknown fault kind %q", f.kind)
}

// osdAddrs returns the addresses the clients know for an OSD.
func (in *injector) osdAddrs(id int) []netip.AddrPort {
	seen := map[netip.AddrPort]bool{}
	var out []netip.AddrPort
	for _, c := range in.conns {
		m := c.OSDMap()
		if m == nil || id >= len(m.ClientAddrs) {
			continue
		}
		for _, a := range m.ClientAddrs[id] {
			if ap := a.AddrPort(); ap.IsValid() && !seen[ap] {
				seen[ap] = true
				out = append(out, ap)
			}
		}
	}
	return out
}

func (in *injector) monAddrs() []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range in.c.MonAddrs {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			out = append(out, ap)
		}
	}
	return out
}

// pickMon names the mon to kill: index i, or for -1 the one most client
// connections of this process go to.
func (in *injector) pickMon(i int) string {
	if i >= 0 {
		return in.c.MonNames[i%len(in.c.MonNames)]
	}
	counts, err := peerCounts(in.monAddrs())
	best, bestN := in.c.MonNames[0], -1
	if err == nil {
		for j, a := range in.c.MonAddrs {
			ap, _ := netip.ParseAddrPort(a)
			if n := counts[ap]; n > bestN {
				best, bestN = in.c.MonNames[j], n
			}
		}
	}
	return best
}

// healAll undoes whatever fault may still be in effect.
func (in *injector) healAll(ctx context.Context) {
	for name := range in.paused {
		_ = in.c.Resume(name)
		delete(in.paused, name)
	}
	for id := range in.outs {
		_ = in.command(ctx, nil, "prefix", "osd in", "ids", []string{strconv.Itoa(id)})
		delete(in.outs, id)
	}
	for _, d := range in.c.Daemons() {
		if in.c.PID(d) == 0 {
			_ = in.c.Start(d)
		}
	}
	if in.nbdc != nil {
		for _, s := range in.nbdc.slots {
			s.gate.open()
		}
	}
	if in.export != nil {
		_ = in.export.start(ctx)
	}
}

// command runs a mon command given as key/value pairs and decodes its
// JSON output into out (when not nil).
func (in *injector) command(ctx context.Context, out any, kv ...any) error {
	m := map[string]any{"format": "json"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	cmd, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	buf, _, err := in.admin.MonCommand(ctx, cmd)
	if err != nil {
		return fmt.Errorf("%s: %w", m["prefix"], err)
	}
	if out != nil {
		if err := json.Unmarshal(buf, out); err != nil {
			return fmt.Errorf("%s: %w", m["prefix"], err)
		}
	}
	return nil
}

// waitHealthy waits (up to limit) until every running mon is in the
// quorum, every running OSD up and in, and every PG active (with clean:
// active+clean, recovery done).
func (in *injector) waitHealthy(ctx context.Context, limit time.Duration, clean bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := in.healthy(ctx, clean)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (in *injector) healthy(ctx context.Context, clean bool) error {
	var q struct {
		QuorumNames []string `json:"quorum_names"`
	}
	if err := in.command(ctx, &q, "prefix", "quorum_status"); err != nil {
		return err
	}
	for _, n := range in.c.MonNames {
		if in.c.PID("mon."+n) != 0 && !slices.Contains(q.QuorumNames, n) {
			return fmt.Errorf("mon.%s not in quorum %v", n, q.QuorumNames)
		}
	}
	var d struct {
		OSDs []struct {
			OSD int `json:"osd"`
			Up  int `json:"up"`
			In  int `json:"in"`
		} `json:"osds"`
	}
	if err := in.command(ctx, &d, "prefix", "osd dump"); err != nil {
		return err
	}
	for _, o := range d.OSDs {
		if in.c.PID("osd."+strconv.Itoa(o.OSD)) != 0 && !in.outs[o.OSD] && (o.Up == 0 || o.In == 0) {
			return fmt.Errorf("osd.%d up=%d in=%d", o.OSD, o.Up, o.In)
		}
	}
	var st cephcluster.PGMapStatus
	if err := in.command(ctx, &st, "prefix", "status"); err != nil {
		return err
	}
	if st.Clean() {
		return nil
	}
	desc, active := "", 0
	for _, s := range st.PGMap.ByState {
		desc += fmt.Sprintf(" %s=%d", s.Name, s.Num)
		if strings.HasPrefix(s.Name, "active") && !strings.Contains(s.Name, "peering") {
			active += s.Num
		}
	}
	if clean {
		return fmt.Errorf("PGs not all active+clean:%s", desc)
	}
	if active < st.PGMap.NumPGs {
		return fmt.Errorf("PGs not all active:%s", desc)
	}
	return nil
}
