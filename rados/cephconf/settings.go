package cephconf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Args are the client options Ceph's tools take on the command line (and
// in CEPH_ARGS). Empty fields are unset.
type Args struct {
	Conf     string // -c, --conf
	Cluster  string // --cluster
	Name     string // -n, --name (client.admin)
	ID       string // -i, --id (admin)
	Keyring  string // -k, --keyring
	KeyFile  string // --keyfile
	Key      string // --key (secret: never logged)
	MonHost  string // -m, --mon-host
	MsMode   string // --ms-mode: crc, secure, prefer-crc, prefer-secure
	NoConfig bool   // --no-config-file / when the caller wants no file at all
}

// Settings are what a client needs to connect, resolved from Args, the
// environment and ceph.conf.
type Settings struct {
	Cluster  string
	ConfPath string // "" when no file was read
	Name     string // entity name, e.g. client.admin
	MonHost  string
	// KeyringPaths lists the keyring files to try, in order.
	KeyringPaths []string
	KeyFile      string
	Key          string // secret: never logged
	// MonMode and Mode are the connection-mode preferences for monitors
	// and for other daemons, as Ceph spells them ("secure crc", "crc").
	MonMode string
	Mode    string
	Conf    *Conf // nil when no file was read
}

// String describes the settings without the key.
func (s *Settings) String() string {
	key := ""
	if s.Key != "" {
		key = " key=<redacted>"
	}
	return fmt.Sprintf("cluster=%s conf=%q name=%s mon_host=%q keyring=%v keyfile=%q%s mon_mode=%q mode=%q",
		s.Cluster, s.ConfPath, s.Name, s.MonHost, s.KeyringPaths, s.KeyFile, key, s.MonMode, s.Mode)
}

// ErrUsage is wrapped by errors about malformed arguments.
var ErrUsage = errors.New("cephconf: bad arguments")

// ArgOption is one of the client options Ceph's tools take on the
// command line and in CEPH_ARGS.
type ArgOption struct {
	// Names are its spellings, long ones with dashes ("-m",
	// "--mon-host"); Ceph's tools also take them with underscores.
	Names []string
	// Value names its value ("FILE"); empty for a switch.
	Value string
	// Help says what it does, in a few words.
	Help string
	set  func(a *Args, v string)
}

// Set records the option in a, with its value v (ignored for a switch).
func (o ArgOption) Set(a *Args, v string) { o.set(a, v) }

// ArgOptions returns the client options, as ParseArgs reads them, for a
// command line parser that takes them with options of its own.
func ArgOptions() []ArgOption {
	str := func(field func(a *Args) *string) func(*Args, string) {
		return func(a *Args, v string) { *field(a) = v }
	}
	return []ArgOption{
		{Names: []string{"-c", "--conf"}, Value: "FILE", Help: "ceph.conf to read (default: CEPH_CONF, or Ceph's usual locations)",
			set: str(func(a *Args) *string { return &a.Conf })},
		{Names: []string{"--cluster"}, Value: "NAME", Help: "cluster name, for the default file names (default ceph)",
			set: str(func(a *Args) *string { return &a.Cluster })},
		{Names: []string{"-n", "--name"}, Value: "TYPE.ID", Help: "identity (default client.admin)",
			set: str(func(a *Args) *string { return &a.Name })},
		{Names: []string{"-i", "--id", "--user"}, Value: "ID", Help: "identity client.ID",
			set: str(func(a *Args) *string { return &a.ID })},
		{Names: []string{"-k", "--keyring"}, Value: "FILE", Help: "keyring holding the identity's key",
			set: str(func(a *Args) *string { return &a.Keyring })},
		{Names: []string{"--keyfile"}, Value: "FILE", Help: "file holding the key alone",
			set: str(func(a *Args) *string { return &a.KeyFile })},
		{Names: []string{"--key"}, Value: "KEY", Help: "the key itself (visible to other users of the machine)",
			set: str(func(a *Args) *string { return &a.Key })},
		{Names: []string{"-m", "--mon-host"}, Value: "MONS", Help: "monitors, in any mon_host form",
			set: str(func(a *Args) *string { return &a.MonHost })},
		{Names: []string{"--ms-mode"}, Value: "MODE", Help: "connection mode: crc, secure, prefer-crc or prefer-secure",
			set: str(func(a *Args) *string { return &a.MsMode })},
		{Names: []string{"--no-config-file"}, Help: "read no ceph.conf",
			set: func(a *Args, _ string) { a.NoConfig = true }},
	}
}

// ParseArgs takes Ceph's global client options out of argv and returns
// them with the arguments it did not recognise, in order. It accepts
// "--opt value", "--opt=value" and option names with - or _.
func ParseArgs(argv []string) (Args, []string, error) {
	opts := ArgOptions()
	var a Args
	var rest []string
	for i := 0; i < len(argv); i++ {
		arg := argv[i]
		if arg == "--" {
			rest = append(rest, argv[i:]...)
			break
		}
		name, val, hasVal := arg, "", false
		if strings.HasPrefix(arg, "--") {
			if eq := strings.IndexByte(arg, '='); eq >= 0 {
				name, val, hasVal = arg[:eq], arg[eq+1:], true
			}
			name = "--" + strings.ReplaceAll(name[2:], "_", "-")
		}
		o, ok := findArgOption(opts, name)
		if !ok {
			rest = append(rest, arg)
			continue
		}
		if o.Value != "" && !hasVal {
			if i+1 >= len(argv) {
				return a, nil, fmt.Errorf("%w: %s needs a value", ErrUsage, name)
			}
			i++
			val = argv[i]
		}
		o.Set(&a, val)
	}
	return a, rest, nil
}

func findArgOption(opts []ArgOption, name string) (ArgOption, bool) {
	for _, o := range opts {
		if slices.Contains(o.Names, name) {
			return o, true
		}
	}
	return ArgOption{}, false
}

// merge fills unset fields of a from b.
func (a Args) merge(b Args) Args {
	fill := func(dst *string, src string) {
		if *dst == "" {
			*dst = src
		}
	}
	fill(&a.Conf, b.Conf)
	fill(&a.Cluster, b.Cluster)
	fill(&a.Name, b.Name)
	fill(&a.ID, b.ID)
	fill(&a.Keyring, b.Keyring)
	fill(&a.KeyFile, b.KeyFile)
	fill(&a.Key, b.Key)
	fill(&a.MonHost, b.MonHost)
	fill(&a.MsMode, b.MsMode)
	a.NoConfig = a.NoConfig || b.NoConfig
	return a
}

// Resolve combines explicit args with CEPH_ARGS and CEPH_CONF from getenv
// (os.Getenv when nil) and the ceph.conf they name (or the first of
// Ceph's default locations that exists), the way Ceph's tools do:
// explicit arguments win over CEPH_ARGS, which win over the file.
func Resolve(explicit Args, getenv func(string) string) (*Settings, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	a := explicit
	if env := getenv("CEPH_ARGS"); env != "" {
		ea, rest, err := ParseArgs(strings.Fields(env))
		if err != nil {
			return nil, fmt.Errorf("CEPH_ARGS: %w", err)
		}
		if len(rest) > 0 {
			return nil, fmt.Errorf("%w: CEPH_ARGS: unsupported options %v", ErrUsage, rest)
		}
		a = a.merge(ea)
	}
	s := &Settings{Cluster: a.Cluster}
	if s.Cluster == "" {
		s.Cluster = "ceph"
		// like Ceph's tools, "-c /etc/ceph/foo.conf" implies cluster "foo"
		if conf := first(a.Conf, getenv("CEPH_CONF")); strings.HasSuffix(conf, ".conf") && !a.NoConfig {
			s.Cluster = strings.TrimSuffix(filepath.Base(conf), ".conf")
		}
	}
	switch {
	case a.Name != "" && a.ID != "":
		return nil, fmt.Errorf("%w: give --name or --id, not both", ErrUsage)
	case a.Name != "":
		if !strings.Contains(a.Name, ".") {
			return nil, fmt.Errorf("%w: name %q is not TYPE.ID", ErrUsage, a.Name)
		}
		s.Name = a.Name
	case a.ID != "":
		s.Name = "client." + a.ID
	default:
		s.Name = "client.admin"
	}
	if !a.NoConfig {
		path := a.Conf
		if path == "" {
			path = getenv("CEPH_CONF")
		}
		if path != "" {
			c, err := Load(path)
			if err != nil {
				return nil, err
			}
			s.Conf, s.ConfPath = c, path
		} else {
			for _, p := range defaultConfPaths(s.Cluster, getenv("HOME")) {
				if c, err := Load(p); err == nil {
					s.Conf, s.ConfPath = c, p
					break
				}
			}
		}
	}
	get := func(key string) string {
		v, _ := s.Conf.Get(s.Name, key)
		return Expand(v, s.Cluster, s.Name)
	}
	s.MonHost = first(a.MonHost, get("mon_host"))
	if s.MonHost == "" {
		return nil, fmt.Errorf("%w: no monitors: set mon_host in ceph.conf, or -m/--mon-host (conf: %q)", ErrUsage, s.ConfPath)
	}
	s.Key = first(a.Key, get("key"))
	s.KeyFile = first(a.KeyFile, get("keyfile"))
	kr := first(a.Keyring, get("keyring"))
	if kr == "" {
		kr = "/etc/ceph/$cluster.$name.keyring,/etc/ceph/$cluster.keyring,/etc/ceph/keyring,/etc/ceph/keyring.bin"
	}
	for _, p := range strings.FieldsFunc(Expand(kr, s.Cluster, s.Name), func(r rune) bool { return r == ',' || r == ';' }) {
		if p = strings.TrimSpace(p); p != "" {
			s.KeyringPaths = append(s.KeyringPaths, p)
		}
	}
	s.MonMode = first(get("ms_mon_client_mode"), "secure crc")
	s.Mode = first(get("ms_client_mode"), "crc secure")
	if a.MsMode != "" {
		m, err := msModePreference(a.MsMode)
		if err != nil {
			return nil, err
		}
		s.MonMode, s.Mode = m, m
	}
	return s, nil
}

// msModePreference maps the kernel-style ms_mode names onto Ceph's
// ordered preference lists.
func msModePreference(m string) (string, error) {
	switch m {
	case "crc":
		return "crc", nil
	case "secure":
		return "secure", nil
	case "prefer-crc":
		return "crc secure", nil
	case "prefer-secure":
		return "secure crc", nil
	}
	return "", fmt.Errorf("%w: --ms-mode %q: want crc, secure, prefer-crc or prefer-secure", ErrUsage, m)
}

func defaultConfPaths(cluster, home string) []string {
	ps := []string{filepath.Join("/etc/ceph", cluster+".conf")}
	if home != "" {
		ps = append(ps, filepath.Join(home, ".ceph", cluster+".conf"))
	}
	return append(ps, cluster+".conf")
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
