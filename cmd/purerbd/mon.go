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

	"github.com/purerbd/purerbd/rados/monc"
)

// `purerbd mon command`: runs a monitor command and reports it as the
// ceph tool does: the output buffer on stdout, the status string on
// stderr ("Error ENOENT: ..." on failure), the errno as exit status.

const monUsage = `usage: purerbd mon command '<json>' [<json>...] [-i INFILE] [-o OUTFILE] [client options]

Sends the command (the JSON pieces are joined, as ceph joins them) to the
monitors, e.g. '{"prefix":"osd pool ls","format":"json"}'. The input buffer
comes from INFILE (- for stdin); the output goes to stdout or OUTFILE.

` + globalUsage

func runMon(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runMonWithInput(ctx, args, os.Stdin, stdout, stderr)
}

// runMonWithInput is runMon with the reader "-i -" takes input from.
func runMonWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "command" {
		fmt.Fprintln(stderr, monUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return errors.New("expected subcommand 'command'")
	}
	// -i is ceph's input file here, not --id: take it before the client
	// options are parsed
	var inFile, outFile string
	var rest []string
	for i := 1; i < len(args); i++ {
		switch a := args[i]; a {
		case "-i", "--in-file", "-o", "--out-file":
			if i+1 >= len(args) {
				return fmt.Errorf("%s needs a file name", a)
			}
			i++
			if a == "-i" || a == "--in-file" {
				inFile = args[i]
			} else {
				outFile = args[i]
			}
		case "-h", "--help":
			fmt.Fprintln(stdout, monUsage)
			return nil
		default:
			rest = append(rest, a)
		}
	}
	g, cmd, err := parseGlobalFlags(rest)
	if err != nil {
		return err
	}
	if len(cmd) == 0 {
		fmt.Fprintln(stderr, monUsage)
		return errors.New("no command given")
	}
	if joined := strings.Join(cmd, ""); !json.Valid([]byte(joined)) {
		return fmt.Errorf("the command is not JSON: %s", joined)
	}
	var inbuf []byte
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
	mc, err := g.connectMon(ctx, stderr)
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
		return exitStatus(int(ce.Errno))
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
