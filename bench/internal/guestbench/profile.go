package guestbench

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// PrefixProfile starts the lines that carry a profile of a purerbd
// server in the guest (the CPU profiles of profileServers, the node
// plugin's heap) out through the console: "PROFILE NAME I/N CHUNK",
// chunk I of N of the profile, base64-encoded (short lines, so that a
// kernel message cuts at most one of them).
const PrefixProfile = "PROFILE "

// profileChunk is the base64 bytes per PROFILE line.
const profileChunk = 2048

// The profile names of the CPU profiles: the purerbd servers behind
// Ceph and on a memory disk, and the guest program running purerbd's
// rbd package with no device. Set side by side, they say where a
// request's cost grows when the crossing and the client come together.
const (
	ProfileNBD        = "nbd"
	ProfileNBDMemory  = "nbd-memory"
	ProfileUblk       = "ublk"
	ProfileUblkMemory = "ublk-memory"
	ProfileClient     = "client"
)

// profileTarget is a purerbd server to profile: how to map its device
// with the environment given. A device that is a selfLoaded client is
// this process: its profile is taken here, with runtime/pprof.
type profileTarget struct {
	name string
	open func(ctx context.Context, env []string) (device, error)
}

// profileTargets are what -profile profiles: the purerbd servers of the
// rbd and rbd-ublk groups (imgs[0], imgs[2]) and of the memory disks,
// and the rbd-client group's client. The ublk servers log from level
// info (-v), so that the counters a device logs when it is deleted (its
// requests per fetch, wake-up and commit) reach the console.
func profileTargets(o options, imgs []string) []profileTarget {
	cluster := []string{"-m", o.mon, "--id", o.user, "--keyring", o.keyring}
	targets := []profileTarget{
		{name: ProfileNBD, open: func(ctx context.Context, env []string) (device, error) {
			return purerbdMapEnv(ctx, env, o.purerbd, append(cluster, o.pool+"/"+imgs[0])...)
		}},
		{name: ProfileNBDMemory, open: func(ctx context.Context, env []string) (device, error) {
			return purerbdMapEnv(ctx, env, o.purerbd, "--memory", o.memSize)
		}},
	}
	if guestio.LoadModules("ublk_drv") == nil {
		if len(imgs) == 3 {
			targets = append(targets, profileTarget{name: ProfileUblk, open: func(ctx context.Context, env []string) (device, error) {
				return purerbdDeviceMap(ctx, o.purerbd, env, append([]string{"-v", "-t", "ublk"}, append(cluster, o.pool+"/"+imgs[2])...)...)
			}})
		}
		targets = append(targets, profileTarget{name: ProfileUblkMemory, open: func(ctx context.Context, env []string) (device, error) {
			return purerbdDeviceMap(ctx, o.purerbd, env, "-v", "-t", "ublk", "--memory", o.memSize)
		}})
	}
	if o.clientImages != "" {
		img, _, _ := strings.Cut(o.clientImages, ",")
		targets = append(targets, profileTarget{name: ProfileClient, open: func(ctx context.Context, _ []string) (device, error) {
			return openPurerbdClient(ctx, o, img)
		}})
	}
	return targets
}

// profileServers maps each target's device with PURERBD_CPUPROFILE set,
// runs the 4 KiB random read and write cases of depth o.profileQD on it
// for d each, unmaps it (the server writes the profile as it exits) and
// prints the profile. They run after the measured groups, so profiling
// costs those nothing.
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
	self, inProcess := dev.(selfLoaded)
	var own bytes.Buffer
	if inProcess {
		if err := pprof.StartCPUProfile(&own); err != nil {
			_ = dev.Close(ctx)
			return err
		}
	}
	for _, c := range ioCases(false) {
		if c.BS != 4096 || c.QD != o.profileQD {
			continue
		}
		var r ioResult
		if inProcess {
			r, err = self.runCase(ctx, c, o.span, d)
		} else {
			r, err = runIO(ctx, dev.Path(), o.span, c, d, o.runtimeSyscalls)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", c.Name, err)
			break
		}
		// the profile's samples per op need the ops
		note("profile of %s: %s: %d ops in %.2f s", t.name, c.Name, r.ops, r.seconds)
	}
	if inProcess {
		pprof.StopCPUProfile()
	}
	if err != nil {
		_ = dev.Close(ctx)
		return err
	}
	if err := dev.Close(ctx); err != nil {
		return fmt.Errorf("unmap: %w", err)
	}
	b := own.Bytes()
	if !inProcess {
		if b, err = os.ReadFile(path); err != nil {
			return err
		}
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
