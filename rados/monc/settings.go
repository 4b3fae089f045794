package monc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/cephconf"
	"github.com/purerbd/purerbd/rados/msgr"
)

// ConfigFromSettings builds a Config from resolved client settings (see
// cephconf.Resolve): the monitors of mon_host (host names resolved with
// res; nil means the system resolver), the entity name, the auth method
// from auth_client_required, the key (Settings.Key, else KeyFile, else
// the first keyring of KeyringPaths that holds one for the name) and the
// monitor connection mode. Timeouts and the logger are left for the
// caller to set.
func ConfigFromSettings(ctx context.Context, s *cephconf.Settings, res cephconf.Resolver) (Config, error) {
	var cfg Config
	if res == nil {
		res = net.DefaultResolver
	}
	mons, err := cephconf.ParseMonHost(ctx, s.MonHost, res)
	if err != nil {
		return cfg, fmt.Errorf("monc: mon_host: %w", err)
	}
	for _, m := range mons {
		cfg.MonAddrs = append(cfg.MonAddrs, m.Addr.String())
	}
	if cfg.Name, err = auth.ParseName(s.Name); err != nil {
		return cfg, fmt.Errorf("monc: %w", err)
	}
	if cfg.Mode, err = msgr.ParseMode(s.MonMode); err != nil {
		return cfg, fmt.Errorf("monc: ms_mon_client_mode: %w", err)
	}
	required, _ := s.Conf.Get(s.Name, "auth_client_required")
	if authNoneOnly(required) {
		cfg.AuthNone = true
		return cfg, nil
	}
	if cfg.Key, err = findKey(s); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// authNoneOnly reports whether an auth_client_required value allows
// only auth none.
func authNoneOnly(v string) bool {
	methods := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
	if len(methods) == 0 {
		return false
	}
	for _, m := range methods {
		if m != "none" {
			return false
		}
	}
	return true
}

// findKey locates the secret for s.Name as Ceph's tools do: an explicit
// key, a key file, or the keyrings in order.
func findKey(s *cephconf.Settings) (auth.CryptoKey, error) {
	if s.Key != "" {
		k, err := auth.ParseKey(s.Key)
		if err != nil {
			return k, fmt.Errorf("monc: --key: %w", err)
		}
		return k, nil
	}
	if s.KeyFile != "" {
		k, err := auth.ReadKeyFile(s.KeyFile)
		if err != nil {
			return k, fmt.Errorf("monc: %w", err)
		}
		return k, nil
	}
	name, err := auth.ParseName(s.Name)
	if err != nil {
		return auth.CryptoKey{}, fmt.Errorf("monc: %w", err)
	}
	var problems []string
	for _, p := range s.KeyringPaths {
		kr, err := auth.ReadKeyring(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		k, err := kr.Key(name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		return k, nil
	}
	msg := fmt.Sprintf("monc: no key for %s: searched keyrings %s", s.Name, strings.Join(s.KeyringPaths, ", "))
	if len(problems) > 0 {
		msg += " (" + strings.Join(problems, "; ") + ")"
	}
	return auth.CryptoKey{}, errors.New(msg)
}
