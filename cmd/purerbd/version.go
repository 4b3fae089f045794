package main

import (
	"context"
	"fmt"
	"io"

	"github.com/purerbd/purerbd/internal/buildinfo"
)

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) error {
	_, err := fmt.Fprintf(stdout, "purerbd %s\n", buildinfo.Version())
	return err
}
