package guestio

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Uptime returns the guest's uptime in seconds (-1 if unknown), for
// timestamps that line up with the kernel log's.
func Uptime() float64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return -1
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}

// DmesgTail returns the last lines of the kernel log.
func DmesgTail(lines int) string {
	buf := make([]byte, 1<<18)
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil {
		return "dmesg: " + err.Error()
	}
	l := strings.Split(strings.TrimSpace(string(buf[:n])), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
