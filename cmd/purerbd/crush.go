package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados/crush"
)

// crushCommand is the crush group: `crush test`.
func crushCommand() *cli.Command {
	o := &crushTestOpts{minRule: -1, maxRule: -1, minRep: -1, maxRep: -1, minX: -1, maxX: -1,
		poolID: -1, weights: map[int]uint32{}}
	test := &cli.Command{
		Name:    "test",
		Summary: "map inputs through a CRUSH map as crushtool --test does",
		Help: `Maps inputs through a CRUSH map the way 'crushtool -i MAP --test' does and
prints the same lines.`,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return runCrushTest(ctx, o, inv.Stdout)
		},
	}
	o.register(test)
	crush := &cli.Command{Name: "crush", Summary: "test placements with a CRUSH map (like crushtool --test)"}
	return crush.Add(test)
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

// register declares crushtool's options on c.
func (o *crushTestOpts) register(c *cli.Command) {
	// ints declares an option setting every one of ps (--rule sets both
	// ends of the rule range)
	ints := func(spec, help string, ps ...*int) {
		c.Func(spec, help, func(v []string) error {
			n, err := strconv.Atoi(v[0])
			if err != nil {
				return errors.New("want an integer")
			}
			for _, p := range ps {
				*p = n
			}
			return nil
		})
	}
	c.String(&o.in, "-i, --infn MAP", "the CRUSH map (as crushtool -o writes it)").Required()
	c.Func("--test", "test mappings (the only thing crush test does; taken for crushtool's syntax)", func([]string) error { return nil })
	ints("--rule R", "test rule R (default: every rule)", &o.minRule, &o.maxRule)
	ints("--min-rule R", "first rule to test", &o.minRule)
	ints("--max-rule R", "last rule to test", &o.maxRule)
	ints("--num-rep N", "map to N replicas (default: every size the rule allows)", &o.minRep, &o.maxRep)
	ints("--min-rep N", "fewest replicas", &o.minRep)
	ints("--max-rep N", "most replicas", &o.maxRep)
	ints("--x X", "map input X alone", &o.minX, &o.maxX)
	ints("--min-x A", "first input (default 0)", &o.minX)
	ints("--max-x B", "last input (default 1023)", &o.maxX)
	c.Func("--pool-id P", "hash the inputs with pool P, as placement groups of the pool are", func(v []string) error {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return errors.New("want an integer")
		}
		o.poolID = n
		return nil
	})
	c.Func("-w, --weight DEV W", "weight device DEV by W (0 to 1) for the test; repeatable", func(v []string) error {
		dev, err := strconv.Atoi(v[0])
		if err != nil {
			return errors.New("want a device number and a weight")
		}
		f, err := strconv.ParseFloat(v[1], 64) // atof, then narrowed like crushtool
		if err != nil {
			return errors.New("want a device number and a weight")
		}
		o.weights[dev] = deviceWeight(float32(f))
		return nil
	})
	c.Bool(&o.showMappings, "--show-mappings", "print each mapping")
	c.Bool(&o.showBad, "--show-bad-mappings", "print the mappings with fewer devices than asked")
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

func runCrushTest(ctx context.Context, o *crushTestOpts, stdout io.Writer) error {
	raw, err := os.ReadFile(o.in)
	if err != nil {
		return err
	}
	m, err := crush.Decode(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", o.in, err)
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
					return err
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
