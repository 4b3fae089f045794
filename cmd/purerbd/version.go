package main

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/internal/buildinfo"
	"github.com/purerbd/purerbd/internal/cli"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:    "version",
		Summary: "print the purerbd version",
		Run: func(_ context.Context, inv *cli.Invocation) error {
			_, err := fmt.Fprintf(inv.Stdout, "purerbd %s\n", buildinfo.Version())
			return err
		},
	}
}
