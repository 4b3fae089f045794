package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados/monc"
)

// `purerbd mon command`: runs a monitor command and reports it as the
// ceph tool does: the output buffer on stdout, the status string on
// stderr ("Error ENOENT: ..." on failure), the errno as exit status.

// monCommand is the mon group: `mon command`.
func monCommand(g *globals) *cli.Command {
	var inFile, outFile string
	command := &cli.Command{
		Name:    "command",
		Summary: "run a monitor command and print its output like ceph",
		Args:    "JSON...",
		MinArgs: 1,
		MaxArgs: cli.Unlimited,
		Help: `Sends the command (the JSON pieces are joined, as ceph joins them) to the
monitors, e.g. '{"prefix":"osd pool ls","format":"json"}'. The input buffer
comes from INFILE (- for stdin); the output goes to stdout or OUTFILE; the
status goes to stderr, and a failure exits with its errno, as with ceph.`,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return runMonCommand(ctx, g, inv.Args, inFile, outFile, inv.Streams)
		},
	}
	// -i is ceph's input file here, as for the ceph tool; --id stays the
	// identity
	command.String(&inFile, "-i, --in-file FILE", "input buffer of the command (- for stdin)")
	command.String(&outFile, "-o, --out-file FILE", "write the output buffer to FILE instead of stdout")
	mon := &cli.Command{Name: "mon", Summary: "run a monitor command and print its output like ceph (mon command '<json>')"}
	return mon.Add(command)
}

func runMonCommand(ctx context.Context, g *globals, cmd []string, inFile, outFile string, s cli.Streams) error {
	stdin, stdout, stderr := s.Stdin, s.Stdout, s.Stderr
	if joined := strings.Join(cmd, ""); !json.Valid([]byte(joined)) {
		return fmt.Errorf("the command is not JSON: %s", joined)
	}
	var inbuf []byte
	var err error
	switch inFile {
	case "":
	case "-":
		if inbuf, err = io.ReadAll(stdin); err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
	default:
		if inbuf, err = os.ReadFile(inFile); err != nil {
			return err
		}
	}
	mc, err := g.connectMon(ctx)
	if err != nil {
		return err
	}
	defer mc.Close()
	out, outs, err := mc.Command(ctx, cmd, inbuf)
	var ce *monc.CommandError
	if err != nil && !errors.As(err, &ce) {
		return err
	}
	if outFile != "" && outFile != "-" {
		if werr := os.WriteFile(outFile, out, 0o644); werr != nil {
			return werr
		}
	} else if _, werr := stdout.Write(out); werr != nil {
		return werr
	}
	if ce != nil {
		fmt.Fprintf(stderr, "Error %s: %s\n", errnoName(ce.Errno), outs)
		return cli.ExitStatus(int(ce.Errno))
	}
	if outs != "" {
		fmt.Fprintln(stderr, outs)
	}
	return nil
}

// errnoName returns the symbolic name of an errno as ceph prints it
// ("ENOENT"), or "error N".
func errnoName(e syscall.Errno) string {
	names := map[syscall.Errno]string{
		syscall.EPERM: "EPERM", syscall.ENOENT: "ENOENT", syscall.EIO: "EIO", syscall.E2BIG: "E2BIG",
		syscall.EAGAIN: "EAGAIN", syscall.ENOMEM: "ENOMEM", syscall.EACCES: "EACCES", syscall.EBUSY: "EBUSY",
		syscall.EEXIST: "EEXIST", syscall.EXDEV: "EXDEV", syscall.ENODEV: "ENODEV", syscall.EINVAL: "EINVAL",
		syscall.ENOSPC: "ENOSPC", syscall.ERANGE: "ERANGE", syscall.ENOSYS: "ENOSYS", syscall.ENOTEMPTY: "ENOTEMPTY",
		syscall.ENOTSUP: "EOPNOTSUPP", syscall.ETIMEDOUT: "ETIMEDOUT", syscall.ENODATA: "ENODATA",
		syscall.EDQUOT: "EDQUOT", syscall.ECANCELED: "ECANCELED",
	}
	if n, ok := names[e]; ok {
		return n
	}
	return fmt.Sprintf("error %d", int(e))
}
