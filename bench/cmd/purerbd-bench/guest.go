package main

import (
	"context"

	"github.com/purerbd/purerbd/bench/internal/guestbench"
)

// runGuest is `purerbd-bench guest`, the program the kernel-path section
// runs inside its VM (package guestbench).
func runGuest(ctx context.Context, args []string) error { return guestbench.Main(ctx, args) }
