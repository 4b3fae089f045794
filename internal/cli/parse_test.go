package cli

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// vals are what a test tree's options received.
type vals struct {
	conf, monHost, id, pool, inFile, size string
	features                              []string
	weights                               [][2]string
	force                                 bool
	threads                               int
}

// testTree is a small tree shaped like purerbd's: global options at the
// root, a group with options of its own, verbs below it, and a verb that
// takes -i for something else than the root does.
func testTree(v *vals) *Command {
	root := &Command{Name: "prog"}
	root.String(&v.conf, "-c, --conf FILE", "ceph.conf")
	root.String(&v.monHost, "-m, --mon-host MONS", "monitors")
	root.String(&v.id, "-i, --id ID", "identity")
	rbd := &Command{Name: "rbd", Summary: "images", UsageStatus: func(k ErrorKind) int {
		if k == MissingArgument || k == BadArgument {
			return 22
		}
		return 1
	}}
	v.pool = "rbd"
	rbd.String(&v.pool, "-p, --pool POOL", "pool")
	create := &Command{Name: "create", Summary: "create an image", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(context.Context, *Invocation) error { return nil }}
	create.String(&v.size, "-s, --size SIZE", "size").Required()
	create.Strings(&v.features, "--image-feature FEATURE", "feature")
	create.Bool(&v.force, "--force", "force")
	v.threads = 16
	create.Int(&v.threads, "--io-threads N", "threads")
	create.Func("-w, --weight DEV W", "weight", func(p []string) error {
		v.weights = append(v.weights, [2]string{p[0], p[1]})
		return nil
	})
	rename := &Command{Name: "rename", Aliases: []string{"mv"}, Summary: "rename an image", Args: "SRC DST", MinArgs: 2, MaxArgs: 2,
		Run: func(context.Context, *Invocation) error { return nil }}
	snap := &Command{Name: "snap", Summary: "snapshots"}
	snap.Add(&Command{Name: "ls", Args: "IMAGE", MinArgs: 1, MaxArgs: 1,
		Run: func(context.Context, *Invocation) error { return nil }})
	rbd.Add(create, rename, snap)
	mon := &Command{Name: "mon"}
	command := &Command{Name: "command", Args: "JSON...", MinArgs: 1, MaxArgs: Unlimited,
		Run: func(context.Context, *Invocation) error { return nil }}
	command.String(&v.inFile, "-i, --in-file FILE", "input")
	mon.Add(command)
	return root.Add(rbd, mon)
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, args string
		cmd        string   // the command reached
		pos        []string // its positional arguments
		check      func(v *vals) bool
	}{
		{"long with a space", "rbd create --size 10M img", "create", []string{"img"},
			func(v *vals) bool { return v.size == "10M" }},
		{"long with =", "rbd create --size=10M img", "create", []string{"img"},
			func(v *vals) bool { return v.size == "10M" }},
		{"short with a space", "rbd create -s 10M img", "create", []string{"img"},
			func(v *vals) bool { return v.size == "10M" }},
		{"short with =", "rbd create -s=10M img", "create", []string{"img"},
			func(v *vals) bool { return v.size == "10M" }},
		{"underscore is dash", "--mon_host 1.2.3.4 rbd create --image_feature layering -s 1 img", "create", []string{"img"},
			func(v *vals) bool { return v.monHost == "1.2.3.4" && v.features[0] == "layering" }},
		{"dash spelling", "--mon-host=1.2.3.4 rbd create -s 1 img", "create", []string{"img"},
			func(v *vals) bool { return v.monHost == "1.2.3.4" }},
		{"global options after the verb", "rbd create img -c /x.conf --pool p -s 1", "create", []string{"img"},
			func(v *vals) bool { return v.conf == "/x.conf" && v.pool == "p" }},
		{"global options before the group", "-c /x.conf -m mon1 rbd -p p create -s 1 img", "create", []string{"img"},
			func(v *vals) bool { return v.conf == "/x.conf" && v.monHost == "mon1" && v.pool == "p" }},
		{"last one wins", "rbd create -s 1 --size 2 img -p a --pool b", "create", []string{"img"},
			func(v *vals) bool { return v.size == "2" && v.pool == "b" }},
		{"repeated option accumulates", "rbd create -s 1 --image-feature layering img --image-feature exclusive-lock,object-map", "create", []string{"img"},
			func(v *vals) bool {
				return reflect.DeepEqual(v.features, []string{"layering", "exclusive-lock,object-map"})
			}},
		{"two values", "rbd create -s 1 img --weight 3 0.5 -w 7 0", "create", []string{"img"},
			func(v *vals) bool { return reflect.DeepEqual(v.weights, [][2]string{{"3", "0.5"}, {"7", "0"}}) }},
		{"switch", "rbd create --force -s 1 img", "create", []string{"img"},
			func(v *vals) bool { return v.force }},
		{"switch turned off", "rbd create --force --force=false -s 1 img", "create", []string{"img"},
			func(v *vals) bool { return !v.force }},
		{"default kept", "rbd create -s 1 img", "create", []string{"img"},
			func(v *vals) bool { return v.threads == 16 && v.pool == "rbd" && !v.force }},
		{"integer", "rbd create -s 1 img --io-threads 4", "create", []string{"img"},
			func(v *vals) bool { return v.threads == 4 }},
		{"alias", "rbd mv a b", "rename", []string{"a", "b"}, nil},
		{"dash alone is an argument", "rbd mv - b", "rename", []string{"-", "b"}, nil},
		{"double dash ends the options", "rbd mv -- -a --b", "rename", []string{"-a", "--b"}, nil},
		{"option value that looks like an option", "rbd create --size -1 img", "create", []string{"img"},
			func(v *vals) bool { return v.size == "-1" }},
		{"nearest declaration wins", "mon command -i in.json --id admin {}", "command", []string{"{}"},
			func(v *vals) bool { return v.inFile == "in.json" && v.id == "admin" }},
		{"root's -i elsewhere", "rbd -i admin snap ls img", "ls", []string{"img"},
			func(v *vals) bool { return v.id == "admin" }},
		{"many arguments", "mon command {\"a\": 1, }", "command", []string{"{\"a\":", "1,", "}"}, nil},
		{"an option's name after --", "mon command -- -i", "command", []string{"-i"},
			func(v *vals) bool { return v.inFile == "" }},
	} {
		var v vals
		inv, err := Parse(testTree(&v), strings.Fields(c.args))
		if err != nil {
			t.Errorf("%s: %q: %v", c.name, c.args, err)
			continue
		}
		if inv.Command.Name != c.cmd || !reflect.DeepEqual(inv.Args, c.pos) || inv.Help {
			t.Errorf("%s: %q: command %q args %q help %v; want %q %q", c.name, c.args, inv.Command.Name, inv.Args, inv.Help, c.cmd, c.pos)
		}
		if c.check != nil && !c.check(&v) {
			t.Errorf("%s: %q: options %+v", c.name, c.args, v)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		args   string
		kind   ErrorKind
		msg    string
		status int
	}{
		{"rbd create -s 1 --bogus img", UnknownOption, "unknown option --bogus", 1},
		{"rbd create -s 1 -x img", UnknownOption, "unknown option -x", 1},
		{"rbd create -size 1 img", UnknownOption, "unknown option -size (long options take two dashes: --size)", 1},
		{"status", UnknownCommand, `unknown command "status"`, 2},
		{"rbd bogus", UnknownCommand, `unknown command "bogus"`, 1},
		{"rbd img --pool p create", UnknownCommand, `unknown command "img"`, 1},
		{"", MissingCommand, "missing command", 2},
		{"rbd", MissingCommand, "missing command", 1},
		{"rbd snap", MissingCommand, "missing command", 1},
		{"rbd create img --size", MissingValue, "option --size needs a value (SIZE)", 1},
		{"rbd create img -s 1 -w 3", MissingValue, "option -w needs a value (DEV W)", 1},
		{"-c", MissingValue, "option -c needs a value (FILE)", 2},
		{"rbd create -s 1 img --io-threads many", BadValue, "--io-threads many: want an integer", 1},
		{"rbd create -s 1 img --force=maybe", BadValue, "--force=maybe: want true or false", 1},
		{"rbd create img", MissingArgument, "--size is required", 22},
		{"rbd create -s 1", MissingArgument, "missing IMAGE", 22},
		{"rbd mv a", MissingArgument, "missing DST", 22},
		{"rbd create -s 1 a b", ExtraArgument, `too many arguments: ["b"]`, 1},
		{"mon command", MissingArgument, "missing JSON...", 2},
	} {
		var v vals
		_, err := Parse(testTree(&v), strings.Fields(c.args))
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", c.args, err)
			continue
		}
		if ue.Kind != c.kind || ue.Msg != c.msg || ue.Status() != c.status {
			t.Errorf("%q: kind %d %q status %d; want kind %d %q status %d", c.args, ue.Kind, ue.Msg, ue.Status(), c.kind, c.msg, c.status)
		}
	}
}

// TestHelp: -h, --help and the word help, on every level, print the
// usage of the command they reach on stdout, even after a mistake, and
// run nothing.
func TestHelp(t *testing.T) {
	for _, c := range []struct{ args, usage string }{
		{"--help", "usage: prog [options] <command> ..."},
		{"-h", "usage: prog [options] <command> ..."},
		{"help", "usage: prog [options] <command> ..."},
		{"rbd --help", "usage: prog rbd [options] <command> ..."},
		{"rbd help", "usage: prog rbd [options] <command> ..."},
		{"help rbd", "usage: prog rbd [options] <command> ..."},
		{"rbd help create", "usage: prog rbd create [options] IMAGE"},
		{"rbd create --help", "usage: prog rbd create [options] IMAGE"},
		{"rbd create -h --bogus", "usage: prog rbd create [options] IMAGE"},
		{"rbd create --bogus -h", "usage: prog rbd create [options] IMAGE"},
		{"rbd mv --help", "usage: prog rbd rename [options] SRC DST"},
		{"rbd snap ls -h", "usage: prog rbd snap ls [options] IMAGE"},
		{"rbd -h snap ls", "usage: prog rbd snap ls [options] IMAGE"},
	} {
		var v vals
		var out, errb strings.Builder
		code := Run(context.Background(), testTree(&v), strings.Fields(c.args), Streams{Stdout: &out, Stderr: &errb})
		if code != 0 || errb.Len() > 0 || !strings.HasPrefix(out.String(), c.usage+"\n") {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s\nwant it to start %q", c.args, code, errb.String(), out.String(), c.usage)
		}
	}
	var v vals
	var out strings.Builder
	if err := Execute(context.Background(), testTree(&v), []string{"rbd", "create", "--help"}, Streams{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\noptions:\n  -s, --size SIZE           size (required)\n",
		"  --image-feature FEATURE   feature\n",
		"  --io-threads N            threads (default 16)\n",
		"  -w, --weight DEV W        weight\n",
		"\noptions of prog rbd:\n  -p, --pool POOL           pool (default rbd)\n",
		"\nglobal options: see 'prog --help'\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rbd create --help lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := Execute(context.Background(), testTree(&v), []string{"rbd", "--help"}, Streams{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "commands:\n  create       create an image\n  rename (mv)  rename an image\n  snap         snapshots\n") {
		t.Errorf("rbd --help lists the commands so:\n%s", out.String())
	}
}

// TestReport: what the binary prints and exits with for each outcome.
func TestReport(t *testing.T) {
	var v vals
	tree := testTree(&v)
	failing := &Command{Name: "fail", Run: func(context.Context, *Invocation) error { return errors.New("it broke") }}
	reported := &Command{Name: "reported", Run: func(context.Context, *Invocation) error { return ExitStatus(5) }}
	misused := &Command{Name: "misused", Args: "IMAGE@SNAP", MinArgs: 1, MaxArgs: 1,
		Run: func(context.Context, *Invocation) error { return Usagef(BadArgument, "bad image spec %q", "x") }}
	tree.Find("rbd").Add(failing, reported, misused)
	for _, c := range []struct {
		args   string
		code   int
		stderr string
	}{
		{"rbd fail", 1, "prog rbd fail: it broke\n"},
		{"rbd reported", 5, ""},
		{"rbd misused x", 22, "prog rbd misused: bad image spec \"x\"\n'prog rbd misused --help' shows the usage\n"},
		{"rbd create img --bogus", 1, "prog rbd create: unknown option --bogus\n'prog rbd create --help' shows the usage\n"},
		{"rbd", 1, "prog rbd: missing command\ncommands:\n"},
		{"", 2, "prog: missing command\ncommands:\n"},
	} {
		var out, errb strings.Builder
		code := Run(context.Background(), tree, strings.Fields(c.args), Streams{Stdout: &out, Stderr: &errb})
		if code != c.code || !strings.HasPrefix(errb.String(), c.stderr) || out.Len() > 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stderr starting %q", c.args, code, out.String(), errb.String(), c.code, c.stderr)
		}
	}
}

// TestBeforeAfter: the hooks run from the root down, their cleanups in
// the reverse order; a failing hook stops the verb.
func TestBeforeAfter(t *testing.T) {
	var log []string
	hook := func(name string, fail bool) func(context.Context, *Invocation) (func(), error) {
		return func(context.Context, *Invocation) (func(), error) {
			log = append(log, "before "+name)
			if fail {
				return nil, fmt.Errorf("%s failed", name)
			}
			return func() { log = append(log, "after "+name) }, nil
		}
	}
	verb := &Command{Name: "verb", Run: func(context.Context, *Invocation) error { log = append(log, "run"); return nil }}
	group := &Command{Name: "group", Before: hook("group", false)}
	root := (&Command{Name: "root", Before: hook("root", false)}).Add(group.Add(verb))
	if err := Execute(context.Background(), root, []string{"group", "verb"}, Streams{}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"before root", "before group", "run", "after group", "after root"}; !reflect.DeepEqual(log, want) {
		t.Errorf("order %q, want %q", log, want)
	}
	log = nil
	group.Before = hook("group", true)
	err := Execute(context.Background(), root, []string{"group", "verb"}, Streams{})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Path != "root group verb" || err.Error() != "group failed" {
		t.Errorf("failing hook: %v", err)
	}
	if want := []string{"before root", "before group", "after root"}; !reflect.DeepEqual(log, want) {
		t.Errorf("order %q, want %q", log, want)
	}
}

// TestSubtreeEntry: a command line that starts at a group (a binary
// reached as `rbd`) names it as the program and still takes the root's
// options.
func TestSubtreeEntry(t *testing.T) {
	var v vals
	rbd := testTree(&v).Find("rbd")
	inv, err := Parse(rbd, []string{"create", "-c", "/x.conf", "-s", "1", "img"})
	if err != nil || inv.Path() != "rbd create" || v.conf != "/x.conf" {
		t.Fatalf("%v, path %q, conf %q", err, inv.Path(), v.conf)
	}
	var out strings.Builder
	if err := Execute(context.Background(), rbd, []string{"create", "--help"}, Streams{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "usage: rbd create [options] IMAGE\n") || !strings.Contains(out.String(), "\noptions of rbd:\n") ||
		!strings.Contains(out.String(), "\nglobal options: see 'rbd --help'\n") {
		t.Errorf("usage:\n%s", out.String())
	}
	out.Reset()
	if err := Execute(context.Background(), rbd, []string{"--help"}, Streams{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "usage: rbd [options] <command> ...\n") ||
		!strings.Contains(out.String(), "\nglobal options:\n  -c, --conf FILE") {
		t.Errorf("usage:\n%s", out.String())
	}
}

// TestBadSpecs: a malformed declaration is a bug found when the tree is
// built.
func TestBadSpecs(t *testing.T) {
	for _, spec := range []string{"", "POOL", "-pool P", "--pool P, --p", "-h", "--help", "--x A, B"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("spec %q accepted", spec)
				}
			}()
			var s string
			(&Command{Name: "c"}).String(&s, spec, "")
		}()
	}
	defer func() {
		if recover() == nil {
			t.Error("an option declared twice was accepted")
		}
	}()
	var a, b string
	c := &Command{Name: "c"}
	c.String(&a, "-p, --pool P", "")
	c.String(&b, "--pool X", "")
}
