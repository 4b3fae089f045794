package vmtest

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// A guest kernel under TCG now and then locks up after init too: its
// soft-lockup watchdog reports a CPU stuck in the kernel, again every
// half minute or so, and the guest never comes back (a node of the
// Kubernetes end-to-end test once sat 15 minutes so, both vCPUs stuck,
// until its caller gave up). The watch below stops such a boot as soon
// as one CPU has been stuck for lockupLimit: it reads the vCPUs'
// registers through qemu's monitor, as for a boot that stalls before
// init, and kills the guest. Whether the boot is tried again depends on
// when the lockup came (Config.Ready).

// softLockup is the guest kernel's soft-lockup report; its group is the
// seconds the CPU has been stuck.
var softLockup = regexp.MustCompile(`watchdog: BUG: soft lockup - CPU#\d+ stuck for (\d+)s!`)

// lockupLimit is how long the guest must report a CPU stuck before its
// boot counts as locked up. The watchdog first reports after about 20 s,
// which an emulator starved by a loaded host can cause and the guest
// survive; a minute it does not.
const lockupLimit = 60 * time.Second

// A guest kernel can also die in a storm of Oopses (one under TCG once
// faulted on the same NULL pointer 34 times in a second), which ends
// nothing: the test waits out its own bound. oopsLine is an Oops report,
// its group the Oops's number since boot; oopsLimit Oopses count as a
// lockup. A single Oops may kill only the task that hit it, which a test
// may survive, so one alone stops nothing.
var oopsLine = regexp.MustCompile(`(?:Oops|general protection fault|invalid opcode)[^\[]*\[#(\d+)\]`)

const oopsLimit = 10

// lockedUp reports whether line is the guest kernel reporting a CPU
// stuck for at least lockupLimit, or its oopsLimit-th Oops.
func lockedUp(line string) bool {
	if m := oopsLine.FindStringSubmatch(line); m != nil {
		n, err := strconv.Atoi(m[1])
		return err == nil && n >= oopsLimit
	}
	m := softLockup.FindStringSubmatch(line)
	if m == nil {
		return false
	}
	s, err := strconv.Atoi(m[1])
	return err == nil && time.Duration(s)*time.Second >= lockupLimit
}

// LockupMark starts the console line that reports a boot stopped as
// locked up, once per such boot.
const LockupMark = "vmtest: the guest kernel locked up"

// isClosed reports whether ch is closed; a nil channel never is.
func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// lockupReport pauses the locked-up guest through qemu's monitor at sock
// and writes its vCPUs' registers through say, leaving it paused for the
// kill.
func lockupReport(ctx context.Context, sock, line string, say func(string)) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	m, err := dialMonitor(ctx, sock)
	if err != nil {
		say(fmt.Sprintf("%s; qemu's monitor: %v", LockupMark, err))
		return
	}
	defer m.conn.Close()
	if err := m.pause(ctx); err != nil {
		say(LockupMark + "; qemu's monitor: " + err.Error())
		return
	}
	say(LockupMark + " (" + line + "): its vCPUs, paused for each sample")
	sampleVCPUs(ctx, m, say)
}
