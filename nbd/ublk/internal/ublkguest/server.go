package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/ublk"
)

// runServer is a server process over a file backend: "serve FILE" adds
// a device, "recover ID FILE" takes device ID over from a dead server.
// It says "ready <id>" on stdout, then stops and deletes the device on
// "stop" from stdin (answering "stopped").
func runServer(ctx context.Context, mode string, args []string) error {
	log := logger(mode)
	var id int
	file := ""
	switch {
	case mode == "serve" && len(args) == 1:
		file = args[0]
	case mode == "recover" && len(args) == 2:
		var err error
		if id, err = strconv.Atoi(args[0]); err != nil {
			return err
		}
		file = args[1]
	default:
		return fmt.Errorf("%s: bad arguments %q", mode, args)
	}
	f, err := nbd.OpenFile(file, false)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg := ublk.Config{Backend: f, Queues: 2, QueueDepth: 32, MaxIOBytes: 256 << 10, Logger: log}
	actx, cancel := context.WithTimeout(ctx, 60*time.Second)
	var dev *ublk.Device
	if mode == "serve" {
		dev, err = ublk.Serve(actx, cfg)
	} else {
		dev, err = ublk.Recover(actx, id, cfg)
	}
	cancel()
	if err != nil {
		return err
	}
	fmt.Printf("ready %d\n", dev.ID())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "stop" {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := dev.Stop(sctx)
			cancel()
			if err != nil {
				return err
			}
			fmt.Println("stopped")
			return nil
		}
	}
	// stdin closed: the parent is gone; leave the device for a recovery
	select {}
}
