package main

import (
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
)

// Image specs as rbd reads them: [POOL/[NAMESPACE/]]NAME[@SNAP].

// imageSpec is [pool/[namespace/]]name[@snap].
type imageSpec struct {
	pool, ns, name, snap string
}

// String is POOL/[NAMESPACE/]IMAGE[@SNAP].
func (sp imageSpec) String() string {
	s := sp.pool + "/"
	if sp.ns != "" {
		s += sp.ns + "/"
	}
	s += sp.name
	if sp.snap != "" {
		s += "@" + sp.snap
	}
	return s
}

// parseSpec reads an image spec; the pool and namespace default to the
// --pool and --namespace options. wantSnap requires @SNAP.
func (c *rbdCommand) parseSpec(s string, wantSnap bool) (imageSpec, error) {
	sp := imageSpec{pool: c.pool, ns: c.ns}
	if at := strings.IndexByte(s, '@'); at >= 0 {
		if at == len(s)-1 {
			return sp, cli.Usagef(cli.BadArgument, "bad image spec %q: no snapshot after @", s)
		}
		sp.snap = s[at+1:]
		s = s[:at]
	}
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 1:
		sp.name = parts[0]
	case 2:
		sp.pool, sp.name = parts[0], parts[1]
	case 3:
		sp.pool, sp.ns, sp.name = parts[0], parts[1], parts[2]
	default:
		return sp, cli.Usagef(cli.BadArgument, "bad image spec %q", s)
	}
	if sp.name == "" || sp.pool == "" {
		return sp, cli.Usagef(cli.BadArgument, "bad image spec %q", s)
	}
	if wantSnap && sp.snap == "" {
		return sp, cli.Usagef(cli.MissingArgument, "image spec %q needs @snapshot", s)
	}
	return sp, nil
}
