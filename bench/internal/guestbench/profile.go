package guestbench

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"time"
)

// PrefixProfile starts the lines that carry a profile of a purerbd
// server in the guest (the CPU profiles of profileServers, the node
// plugin's heap) out through the console: "PROFILE NAME I/N CHUNK",
// chunk I of N of the profile, base64-encoded (short lines, so that a
// kernel message cuts at most one of them).
const PrefixProfile = "PROFILE "

// profileChunk is the base64 bytes per PROFILE line.
const profileChunk = 2048

// profileTarget is a purerbd server to profile: how to map its device
// with the environment given.
type profileTarget struct {
	name string
	open func(ctx context.Context, env []string) (device, error)
}

// profileServers maps each target's device with PURERBD_CPUPROFILE set,
// runs the 4 KiB QD32 random read and write cases on it for d each,
// unmaps it (the server writes the profile as it exits) and prints the
// profile. They run after the measured groups, so profiling costs those
// nothing.
func profileServers(ctx context.Context, o options, targets []profileTarget, d time.Duration) {
	for _, t := range targets {
		if err := profileServer(ctx, o, t, d); err != nil {
			note("profile of %s: %v", t.name, err)
		}
	}
}

func profileServer(ctx context.Context, o options, t profileTarget, d time.Duration) error {
	path := "/tmp/purerbd-" + t.name + ".pprof"
	dev, err := t.open(ctx, append([]string{"PURERBD_CPUPROFILE=" + path}, o.serverEnv...))
	if err != nil {
		return err
	}
	for _, c := range ioCases(false) {
		if c.BS != 4096 || c.QD != 32 {
			continue
		}
		if _, err := runIO(ctx, dev.Path(), o.span, c, d); err != nil {
			_ = dev.Close(ctx)
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	if err := dev.Close(ctx); err != nil {
		return fmt.Errorf("unmap: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	printProfile(t.name, b)
	return nil
}

// printProfile prints profile b as the PROFILE lines of name.
func printProfile(name string, b []byte) {
	s := base64.StdEncoding.EncodeToString(b)
	n := (len(s) + profileChunk - 1) / profileChunk
	for i := range n {
		fmt.Printf("%s%s %d/%d %s\n", PrefixProfile, name, i+1, n, s[i*profileChunk:min(len(s), (i+1)*profileChunk)])
	}
}
