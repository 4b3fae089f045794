package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados/cephconf"
)

// globalFlags are the client options shared by the verbs that talk to a
// cluster.
type globalFlags struct {
	conn           cephconf.Args
	connectTimeout time.Duration
}

// parseGlobalFlags takes the client options out of args, wherever they
// appear, and returns the other arguments in order.
func parseGlobalFlags(args []string) (globalFlags, []string, error) {
	conn, rest, err := cephconf.ParseArgs(args)
	if err != nil {
		return globalFlags{}, nil, err
	}
	g := globalFlags{conn: conn, connectTimeout: defaultConnectTimeout}
	var out []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			out = append(out, rest[i:]...)
			break
		}
		name, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			if eq := strings.IndexByte(a, '='); eq >= 0 {
				name, val, hasVal = a[:eq], a[eq+1:], true
			}
			name = "--" + strings.ReplaceAll(name[2:], "_", "-")
		}
		if name != "--connect-timeout" {
			out = append(out, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(rest) {
				return g, nil, fmt.Errorf("%s needs a value", name)
			}
			i++
			val = rest[i]
		}
		secs, err := strconv.ParseFloat(val, 64)
		if err != nil || secs <= 0 {
			return g, nil, fmt.Errorf("--connect-timeout %q: want a positive number of seconds", val)
		}
		g.connectTimeout = time.Duration(secs * float64(time.Second))
	}
	return g, out, nil
}
