// Command pause is the e2e cluster's pod sandbox process, built here
// because no image can be pulled: like Kubernetes' own pause it holds the
// pod's namespaces open by doing nothing, reaps the zombies that end up
// as its children (it is PID 1 of a pod that shares its PID namespace),
// and exits 0 on SIGINT or SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is what -v prints; the image carries the tag of the pause
// image it stands in for.
const version = "purerbd-e2e-pause"

func main() {
	if len(os.Args) > 1 {
		if os.Args[1] == "-v" {
			fmt.Println(version)
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "pause: unexpected argument %q (only -v)\n", os.Args[1])
		os.Exit(2)
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
		os.Exit(0)
	}
}

// reap collects every child that has exited; SIGCHLDs coalesce, so one
// signal may stand for several children.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
