package rados

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/msgr"
)

// ConfFile is a parsed ceph.conf. Its Get method looks an option up for
// an entity ("client.admin") in the sections [client.admin], [client] and
// [global], in that order; a nil *ConfFile has no options.
type ConfFile = cephconf.Conf

// LoadConfFile reads and parses a ceph.conf file. A missing file fails
// with an error matching fs.ErrNotExist.
func LoadConfFile(path string) (*ConfFile, error) {
	return cephconf.Load(path)
}

// MonitorAddrs resolves a mon_host value, in any form Config.MonHost
// takes, to the monitors' msgr2 addresses ("IP:port"), as Connect dials
// them.
func MonitorAddrs(ctx context.Context, monHost string) ([]string, error) {
	mons, err := cephconf.ParseMonHost(ctx, monHost, nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(mons))
	for i, m := range mons {
		out[i] = m.Addr.String()
	}
	return out, nil
}

// CheckMode reports whether mode is a connection mode Config.MonMode and
// Config.Mode accept: "crc", "secure", "prefer-crc", "prefer-secure",
// Ceph's spellings "crc secure" and "secure crc", or "" for Ceph's
// defaults.
func CheckMode(mode string) error {
	if _, err := msgr.ParseMode(mode); err != nil {
		return fmt.Errorf("rados: %w", err)
	}
	return nil
}
