// Package cephconf reads what a Ceph client needs from ceph.conf files,
// CEPH_CONF, CEPH_ARGS and command-line style flags: the entity name, the
// monitors (mon_host in all the forms Ceph accepts), the keyring or key,
// and the connection modes. Option names are normalised as Ceph does
// ("mon host" and "mon_host" are one option) and looked up in
// the sections [<type>.<id>], [<type>] and [global], in that order.
package cephconf

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Conf is a parsed ceph.conf.
type Conf struct {
	sections map[string]map[string]string
}

// SyntaxError reports a malformed line.
type SyntaxError struct {
	File string
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("cephconf: %s:%d: %s", e.File, e.Line, e.Msg)
}

// NormalizeKey returns the canonical spelling of an option name in a
// file: words joined by underscores. As in Ceph, case matters and dashes
// are not underscores in files (they are on the command line).
func NormalizeKey(k string) string {
	k = strings.TrimSpace(k)
	k = strings.NewReplacer(" ", "_", "\t", "_").Replace(k)
	for strings.Contains(k, "__") {
		k = strings.ReplaceAll(k, "__", "_")
	}
	return k
}

// Load reads and parses a ceph.conf file.
func Load(path string) (*Conf, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cephconf: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse parses ceph.conf syntax: [section] headers, `key = value` lines,
// comments starting with # or ;, trailing backslash continuations and
// double-quoted values.
func Parse(r io.Reader, name string) (*Conf, error) {
	c := &Conf{sections: map[string]map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	section := "global"
	lineNo := 0
	// A continued line accumulates in one growing buffer: joining the
	// pieces as strings would copy the line once per continuation.
	var pending []byte
	for sc.Scan() {
		lineNo++
		pending = append(pending, sc.Bytes()...)
		if n := len(pending); n > 0 && pending[n-1] == '\\' {
			pending = pending[:n-1]
			continue
		}
		line := string(pending)
		pending = pending[:0]
		line = stripComment(line)
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return nil, &SyntaxError{name, lineNo, "unterminated section header"}
			}
			section = strings.TrimSpace(line[1:end])
			if section == "" {
				return nil, &SyntaxError{name, lineNo, "empty section name"}
			}
			continue
		}
		eq := strings.IndexByte(line, '=')
		if eq < 0 {
			return nil, &SyntaxError{name, lineNo, fmt.Sprintf("expected key = value, got %q", line)}
		}
		key := NormalizeKey(line[:eq])
		if key == "" {
			return nil, &SyntaxError{name, lineNo, "empty option name"}
		}
		val := strings.TrimSpace(line[eq+1:])
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		if c.sections[section] == nil {
			c.sections[section] = map[string]string{}
		}
		c.sections[section][key] = val
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cephconf: reading %s: %w", name, err)
	}
	return c, nil
}

// stripComment removes a # or ; comment that is not inside double quotes.
func stripComment(s string) string {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case '#', ';':
			if !inQuote {
				return s[:i]
			}
		}
	}
	return s
}

// Get looks key up for the entity (e.g. "client.admin") in [client.admin],
// then [client], then [global].
func (c *Conf) Get(entity, key string) (string, bool) {
	if c == nil {
		return "", false
	}
	key = NormalizeKey(key)
	for _, s := range lookupSections(entity) {
		if v, ok := c.sections[s][key]; ok {
			return v, true
		}
	}
	return "", false
}

// Sections returns the names of the sections present.
func (c *Conf) Sections() []string {
	out := make([]string, 0, len(c.sections))
	for s := range c.sections {
		out = append(out, s)
	}
	return out
}

func lookupSections(entity string) []string {
	out := []string{}
	if entity != "" {
		out = append(out, entity)
		if i := strings.IndexByte(entity, '.'); i > 0 {
			out = append(out, entity[:i])
		}
	}
	return append(out, "global")
}

// Expand replaces Ceph's metavariables in an option value: $cluster,
// $type, $id, $name (and ${name} forms).
func Expand(v, cluster, entity string) string {
	typ, id := entity, ""
	if i := strings.IndexByte(entity, '.'); i >= 0 {
		typ, id = entity[:i], entity[i+1:]
	}
	return strings.NewReplacer(
		"${cluster}", cluster, "$cluster", cluster,
		"${name}", entity, "$name", entity,
		"${type}", typ, "$type", typ,
		"${id}", id, "$id", id,
	).Replace(v)
}
