package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/purerbd/purerbd/rados/crush"
)

const crushUsage = `usage: purerbd crush test -i MAP [--rule R | --min-rule R --max-rule R]
         [--num-rep N | --min-rep N --max-rep N] [--min-x A --max-x B | --x X]
         [--pool-id P] [--weight DEV W]... --show-mappings|--show-bad-mappings

Maps inputs through a CRUSH map the way 'crushtool -i MAP --test' does and
prints the same lines.`

func runCrush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprintln(stderr, crushUsage)
		return errors.New("expected subcommand 'test'")
	}
	return runCrushTest(ctx, args[1:], stdout)
}

// crushTestOpts mirrors crushtool's tester settings; -1 means unset.
type crushTestOpts struct {
	in               string
	minRule, maxRule int
	minRep, maxRep   int
	minX, maxX       int
	poolID           int64
	weights          map[int]uint32
	showMappings     bool
	showBad          bool
}

// cephFlag normalizes a Ceph-style flag: Ceph accepts '_' and '-'
// interchangeably.
func cephFlag(a string) string { return strings.ReplaceAll(a, "_", "-") }

func parseCrushTest(args []string) (*crushTestOpts, error) {
	o := &crushTestOpts{minRule: -1, maxRule: -1, minRep: -1, maxRep: -1, minX: -1, maxX: -1,
		poolID: -1, weights: map[int]uint32{}}
	next := func(i *int, name string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("%s needs a value", name)
		}
		*i++
		return args[*i], nil
	}
	intArg := func(i *int, name string) (int, error) {
		v, err := next(i, name)
		if err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return n, nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var err error
		var n int
		switch cephFlag(a) {
		case "-i", "--infn":
			o.in, err = next(&i, a)
		case "--test":
		case "--rule":
			n, err = intArg(&i, a)
			o.minRule, o.maxRule = n, n
		case "--min-rule":
			o.minRule, err = intArg(&i, a)
		case "--max-rule":
			o.maxRule, err = intArg(&i, a)
		case "--num-rep":
			n, err = intArg(&i, a)
			o.minRep, o.maxRep = n, n
		case "--min-rep":
			o.minRep, err = intArg(&i, a)
		case "--max-rep":
			o.maxRep, err = intArg(&i, a)
		case "--x":
			n, err = intArg(&i, a)
			o.minX, o.maxX = n, n
		case "--min-x":
			o.minX, err = intArg(&i, a)
		case "--max-x":
			o.maxX, err = intArg(&i, a)
		case "--pool-id":
			n, err = intArg(&i, a)
			o.poolID = int64(n)
		case "--weight", "-w":
			var dev int
			dev, err = intArg(&i, a)
			if err == nil {
				var v string
				v, err = next(&i, a)
				if err == nil {
					var f float64
					f, err = strconv.ParseFloat(v, 64) // atof, then narrowed like crushtool
					o.weights[dev] = deviceWeight(float32(f))
				}
			}
		case "--show-mappings":
			o.showMappings = true
		case "--show-bad-mappings":
			o.showBad = true
		default:
			return nil, fmt.Errorf("unknown argument %q", a)
		}
		if err != nil {
			return nil, err
		}
	}
	if o.in == "" {
		return nil, errors.New("-i MAP is required")
	}
	return o, nil
}

// deviceWeight converts a 0..1 weight to 16.16 fixed point the way
// crushtool's tester does (truncating, clamped to [0, 1]).
func deviceWeight(f float32) uint32 {
	w := int64(f * 0x10000)
	if w < 0 {
		w = 0
	}
	if w > 0x10000 {
		w = 0x10000
	}
	return uint32(w)
}

func runCrushTest(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseCrushTest(args)
	if err != nil {
		return fmt.Errorf("crush test: %w\n%s", err, crushUsage)
	}
	raw, err := os.ReadFile(o.in)
	if err != nil {
		return fmt.Errorf("crush test: %w", err)
	}
	m, err := crush.Decode(raw)
	if err != nil {
		return fmt.Errorf("crush test: %s: %w", o.in, err)
	}
	return crushTest(ctx, m, o, stdout)
}

func crushTest(ctx context.Context, m *crush.Map, o *crushTestOpts, stdout io.Writer) error {
	minRule, maxRule := o.minRule, o.maxRule
	if minRule < 0 || maxRule < 0 {
		minRule, maxRule = 0, len(m.Rules)-1
	}
	minX, maxX := o.minX, o.maxX
	if minX < 0 || maxX < 0 {
		minX, maxX = 0, 1023
	}
	weights := m.PresentWeights()
	var total uint64
	for d := range weights {
		if w, ok := o.weights[d]; ok {
			weights[d] = w
		}
		total += uint64(weights[d])
	}
	args := m.ChooseArgsFor(0)
	bw := bufio.NewWriter(stdout)
	var line []byte
	for r := minRule; r < len(m.Rules) && r <= maxRule; r++ {
		rule := m.Rule(r)
		if rule == nil {
			continue
		}
		minRep, maxRep := o.minRep, o.maxRep
		if minRep < 0 || maxRep < 0 {
			minRep, maxRep = int(rule.MinSize), int(rule.MaxSize)
		}
		for nr := minRep; nr <= maxRep; nr++ {
			if total == 0 {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			for x := minX; x <= maxX; x++ {
				realX := uint32(x)
				if o.poolID != -1 {
					realX = crush.Hash32_2(crush.HashRjenkins1, uint32(x), uint32(o.poolID))
				}
				out, err := m.DoRuleErr(r, realX, nr, weights, args)
				if err != nil {
					return fmt.Errorf("crush test: %w", err)
				}
				if o.showMappings {
					line = append(line[:0], "CRUSH rule "...)
					line = strconv.AppendInt(line, int64(r), 10)
					line = append(line, " x "...)
					line = strconv.AppendInt(line, int64(x), 10)
					line = append(line, ' ')
					line = appendIntList(line, out)
					line = append(line, '\n')
					bw.Write(line)
				}
				if o.showBad && (len(out) != nr || containsNone(out)) {
					fmt.Fprintf(bw, "bad mapping rule %d x %d num_rep %d result %s\n",
						r, x, nr, appendIntList(nil, out))
				}
			}
		}
	}
	return bw.Flush()
}

func containsNone(v []int32) bool {
	for _, x := range v {
		if x == crush.ItemNone {
			return true
		}
	}
	return false
}

// appendIntList formats like Ceph's operator<< for vectors: [a,b,c].
func appendIntList(b []byte, v []int32) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']')
}
