package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestUblkIndex(t *testing.T) {
	for in, want := range map[string]int{"/dev/ublkb0": 0, "ublkb12": 12, "3": 3} {
		if got, err := ublkIndex(in); err != nil || got != want {
			t.Errorf("ublkIndex(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"/dev/nbd0", "/dev/ublkc1", "/dev/ublkb-1", "/dev/ublkb01", ""} {
		if _, err := ublkIndex(in); err == nil {
			t.Errorf("ublkIndex(%q) accepted", in)
		}
	}
}

// TestDeviceMapRefusals checks the mistakes device map refuses before it
// touches the kernel.
func TestDeviceMapRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-t", "ublk", "--memory", "8M", "--file", "/x"}, "not both"},
		{[]string{"-t", "ublk"}, "exactly one"},
		{[]string{"-t", "ublk", "--memory", "8M", "--queues", "0"}, "--queues"},
		{[]string{"-t", "ublk", "--memory", "8M", "--queue-depth", "5000"}, "--queue-depth"},
		{[]string{"-t", "ublk", "--memory", "8M", "--recover", "/dev/ublkb0"}, "not --memory"},
		{[]string{"-t", "ublk", "--file", "/x", "--recover", "/dev/nbd0"}, "not a ublk device"},
		{[]string{"-t", "nbd", "--memory", "8M", "--recover", "/dev/ublkb0"}, "for -t ublk"},
		{[]string{"-t", "scsi", "--memory", "8M"}, "scsi"},
	} {
		var out, errb bytes.Buffer
		err := execute(context.Background(), []string{"device", "map"}, c.args, nil, &out, &errb)
		if err == nil || !strings.Contains(errb.String(), c.want) {
			t.Errorf("device map %q: %v, stderr %q; want an error with %q", c.args, err, errb.String(), c.want)
		}
	}
}
