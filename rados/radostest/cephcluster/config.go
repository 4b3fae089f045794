package cephcluster

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// writeConf writes ceph.conf. Every setting below fixes a problem met when
// booting Pacific by hand on one machine; see the comments.
func (c *Cluster) writeConf() error {
	o := c.Options
	size := o.OSDs
	if size > 3 {
		size = 3
	}
	minSize := 1
	if size >= 3 {
		minSize = 2
	}
	g := map[string]string{
		"fsid":                  c.FSID,
		"mon host":              c.MonHost(),
		"mon initial members":   strings.Join(c.MonNames, ","),
		"public addr":           o.BindAddr,
		"cluster addr":          o.BindAddr,
		"ms bind ipv6":          "false",
		"ms bind msgr1":         fmt.Sprint(o.MsgrV1),
		"ms bind msgr2":         "true",
		"auth cluster required": "cephx",
		"auth service required": "cephx",
		"auth client required":  "cephx",
		// the secure global_id reclaim behaviour, and no health warning
		"auth allow insecure global id reclaim": "false",
		"run dir":                               c.Dir + "/run",
		"pid file":                              "",
		"admin socket":                          c.Dir + "/run/$cluster-$name.asok",
		"crash dir":                             c.Dir + "/crash",
		"log file":                              c.Dir + "/log/$cluster-$name.log",
		"mon cluster log file":                  c.Dir + "/log/$cluster.log",
		"mon data":                              c.Dir + "/mon/$cluster-$id",
		"osd data":                              c.Dir + "/osd/$cluster-$id",
		"mgr data":                              c.Dir + "/mgr/$cluster-$id",
		"osd pool default size":                 fmt.Sprint(size),
		"osd pool default min size":             fmt.Sprint(minSize),
		"osd pool default pg num":               fmt.Sprint(o.PGNum),
		"osd pool default pgp num":              fmt.Sprint(o.PGNum),
		"osd pool default pg autoscale mode":    "off",
		// all OSDs live on one host: replicate across OSDs, not hosts
		"osd crush chooseleaf type":      "0",
		"mon allow pool size one":        "true",
		"mon allow pool delete":          "true",
		"mon warn on pool no redundancy": "false",
		// shared disks are often fuller than the 30% default warns about
		"mon data avail warn":                    "2",
		"mon data avail crit":                    "1",
		"mon warn on osd down out interval zero": "false",
		"mon osd down out interval":              "0",
		// without a mgr, MGR_DOWN would be raised 120 s after mkfs
		"mon mgr mkfs grace": "31536000",
		// commit map changes every 0.1 s instead of 1 s: boots twice as fast
		"paxos propose interval":     "0.1",
		"osd objectstore":            o.ObjectStore,
		"memstore device bytes":      "4294967296",
		"bluestore block create":     "true",
		"bluestore block size":       "10737418240",
		"bluestore block db create":  "false",
		"bluestore block wal create": "false",
		"osd memory target":          "939524096",
		"osd crush update on start":  "true",
		// memstore saves its RAM contents only at a clean shutdown; fast
		// shutdown skips that and a restarted OSD comes back empty
		"osd fast shutdown": fmt.Sprint(o.ObjectStore != StoreMemstore),
		// OSD heartbeats on loopback: detect a killed OSD quickly
		"osd heartbeat grace":    "8",
		"osd heartbeat interval": "2",
		// short PG logs and dup lists (1000 entries each, not up to
		// 10000 and 3000): a test cluster needs no long history, and a
		// busy one-OSD cluster with tens of PGs would otherwise lose
		// half its write rate within minutes as they fill (Pacific's
		// calc_trim_to_aggressive walks the log, and the entries and
		// their indexes grow without bound in a test's lifetime)
		"osd max pg log entries":  "1000",
		"osd pg log dups tracked": "1000",
		"mgr initial modules":     "iostat",
	}
	switch o.Mode {
	case ModeDefault:
	case ModeCRC, ModeSecure:
		for _, k := range []string{"ms cluster mode", "ms service mode", "ms client mode",
			"ms mon cluster mode", "ms mon service mode", "ms mon client mode"} {
			g[k] = o.Mode
		}
	default:
		return fmt.Errorf("cephcluster: unknown connection mode %q (want crc, secure or empty)", o.Mode)
	}
	for k, v := range o.Conf {
		g[strings.ReplaceAll(k, "_", " ")] = v
	}
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteString("# written by purerbd's cephcluster; a throwaway cluster on " + o.BindAddr + "\n[global]\n")
	for _, k := range keys {
		fmt.Fprintf(&sb, "\t%s = %s\n", k, g[k])
	}
	// clients (the ceph, rados and rbd tools run by tests) keep no admin
	// socket: several of them run at once under the same name
	sb.WriteString("[client]\n\tkeyring = " + c.AdminKeyring + "\n\tadmin socket = \n\tlog file = " + c.Dir + "/log/$cluster-$name.$pid.log\n")
	if err := os.WriteFile(c.Conf, []byte(sb.String()), 0o644); err != nil {
		return fmt.Errorf("cephcluster: writing ceph.conf: %w", err)
	}
	return nil
}
