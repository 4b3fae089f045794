package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/purerbd/purerbd/internal/cli"
)

// `purerbd rbd device map|unmap|list|attach|detach -t nbd` (and rbd's
// shorthands map, unmap, showmapped): what rbd runs through rbd-nbd for
// -t nbd, here the rbd-nbd verbs of this binary with the options rbd
// passes on (--read-only, --exclusive, --show-cookie, --cookie, --device
// and -o's comma-separated rbd-nbd options). rbd's default device type,
// krbd, is the kernel's rbd driver, which purerbd does not drive: asking
// for it fails and names -t nbd.

// rbdDeviceOptions are rbd device's options as given.
type rbdDeviceOptions struct {
	rbd *rbdCommand
	typ string
	nbd *rbdNBDOptions
}

const rbdDeviceKRBD = "krbd"

func (c *rbdCommand) newDeviceOptions() *rbdDeviceOptions {
	return &rbdDeviceOptions{rbd: c, typ: rbdDeviceKRBD, nbd: newRBDNBDOptions()}
}

// register declares rbd device's options on cmd.
func (d *rbdDeviceOptions) register(cmd *cli.Command) {
	cmd.String(&d.typ, "-t, --device-type TYPE", "device type: nbd (krbd, rbd's default, is not supported: purerbd maps through nbd)")
	cmd.Func("-o, --options OPTIONS", "device options, comma-separated: rbd-nbd's options without their dashes (try-netlink, io-timeout=SEC, reattach-timeout=SEC, notrim, nbds_max=N, max_part=N, cookie=C, encryption-format=F and encryption-passphrase-file=P, repeated for a clone's ancestors)",
		func(v []string) error { return d.setOptions(v[len(v)-1]) })
	cmd.Bool(&d.nbd.readOnly, "--read-only", "map read-only")
	cmd.Bool(&d.nbd.exclusive, "--exclusive", "forbid writes by other clients")
	cmd.Bool(&d.nbd.quiesce, "--quiesce", "use quiesce hooks (not supported: refused)")
	cmd.String(&d.nbd.quiesceHook, "--quiesce-hook PATH", "quiesce hook (not supported: refused)")
	cmd.Bool(&d.nbd.showCookie, "--show-cookie", "map prints the device's cookie after it")
	cmd.String(&d.nbd.cookie, "--cookie C", "the device's cookie")
	cmd.String(&d.nbd.device, "--device DEV", "attach: the device (/dev/nbdN)")
	cmd.String(&d.nbd.format, "--format FORMAT", "list: plain or json")
	cmd.Bool(&d.nbd.pretty, "--pretty-format", "list: indented json")
}

// setOptions reads -o: KEY or KEY=VALUE, comma-separated, each an
// rbd-nbd option.
func (d *rbdDeviceOptions) setOptions(v string) error {
	for opt := range strings.SplitSeq(v, ",") {
		if opt == "" {
			continue
		}
		key, val, hasVal := strings.Cut(opt, "=")
		key = strings.ReplaceAll(key, "_", "-")
		num := func(p *int) error {
			n, err := strconv.Atoi(val)
			if !hasVal || err != nil {
				return fmt.Errorf("option %s: want %s=N", opt, key)
			}
			*p = n
			return nil
		}
		var err error
		switch key {
		case "try-netlink":
		case "notrim":
			d.nbd.notrim = true
		case "io-timeout", "timeout":
			err = num(&d.nbd.ioTimeout)
		case "reattach-timeout":
			err = num(&d.nbd.reattach)
		case "nbds-max":
			err = num(&d.nbd.nbdsMax)
		case "max-part":
			err = num(&d.nbd.maxPart)
		case "cookie":
			d.nbd.cookie = val
		case "encryption-format":
			// repeated, in order, as rbd hands each -o pair to rbd-nbd
			d.nbd.encFormats = append(d.nbd.encFormats, val)
		case "encryption-passphrase-file":
			d.nbd.encPassphrase = append(d.nbd.encPassphrase, val)
		default:
			err = fmt.Errorf("unknown nbd option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkType refuses device types other than nbd.
func (d *rbdDeviceOptions) checkType() error {
	switch d.typ {
	case deviceNBD:
		return nil
	case rbdDeviceKRBD:
		return cli.Usagef(cli.BadArgument, "device type krbd (the kernel's rbd driver, rbd's default) is not supported: purerbd maps through nbd; give -t nbd")
	}
	return cli.Usagef(cli.BadArgument, "device type %s is not supported (nbd is)", d.typ)
}

// deviceCommand is rbd device.
func (c *rbdCommand) deviceCommand() *cli.Command {
	d := c.newDeviceOptions()
	group := &cli.Command{
		Name:    "device",
		Summary: "map, unmap, list, attach and detach images as kernel block devices (-t nbd)",
		Help: `As rbd device -t nbd runs rbd-nbd, these run purerbd's rbd-nbd verbs: map
prints the device and serves it in the background. krbd, rbd's default
device type, is not supported: give -t nbd.`,
	}
	d.register(group)
	return group.Add(d.mapVerb("map", false), d.mapVerb("attach", true), d.unmapVerb("unmap"), d.unmapVerb("detach"), d.listVerb("list", "ls"))
}

// shorthandCommands are rbd map, unmap and showmapped: rbd device map,
// unmap and list.
func (c *rbdCommand) shorthandCommands() []*cli.Command {
	var out []*cli.Command
	for _, f := range []func(d *rbdDeviceOptions) *cli.Command{
		func(d *rbdDeviceOptions) *cli.Command { return d.mapVerb("map", false) },
		func(d *rbdDeviceOptions) *cli.Command { return d.unmapVerb("unmap") },
		func(d *rbdDeviceOptions) *cli.Command { return d.listVerb("showmapped") },
	} {
		d := c.newDeviceOptions()
		cmd := f(d)
		cmd.Summary += ", as rbd device " + map[string]string{"map": "map", "unmap": "unmap", "showmapped": "list"}[cmd.Name]
		d.register(cmd)
		out = append(out, cmd)
	}
	return out
}

func (d *rbdDeviceOptions) mapVerb(name string, attach bool) *cli.Command {
	summary := "map an image (prints the device)"
	if attach {
		summary = "attach an image to the device its dead server left (--device, --cookie)"
	}
	return &cli.Command{
		Name:    name,
		Summary: summary,
		Args:    "IMAGE-OR-SNAP-SPEC",
		MinArgs: 1,
		MaxArgs: 1,
		Value:   d,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			if err := d.checkType(); err != nil {
				return err
			}
			sp, err := d.rbd.parseSpec(inv.Args[0], false)
			if err != nil {
				return err
			}
			return d.nbd.runMap(ctx, d.rbd.g, inv, sp.String(), attach)
		},
	}
}

func (d *rbdDeviceOptions) unmapVerb(name string) *cli.Command {
	summary := "unmap a device (by path or image)"
	if name == "detach" {
		summary = "end the server of a device, leaving the device for attach"
	}
	return &cli.Command{
		Name:    name,
		Summary: summary,
		Args:    "IMAGE-OR-SNAP-OR-DEVICE-SPEC",
		MinArgs: 1,
		MaxArgs: 1,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			if err := d.checkType(); err != nil {
				return err
			}
			return d.nbd.unmap(ctx, inv.Args[0], name == "detach", func(s string) (imageSpec, error) { return d.rbd.parseSpec(s, false) })
		},
	}
}

func (d *rbdDeviceOptions) listVerb(name string, aliases ...string) *cli.Command {
	return &cli.Command{
		Name:    name,
		Aliases: aliases,
		Summary: "list the mapped devices",
		Run: func(_ context.Context, inv *cli.Invocation) error {
			if err := d.checkType(); err != nil {
				return err
			}
			return d.nbd.list(inv.Stdout)
		},
	}
}
