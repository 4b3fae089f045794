package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// runPlugin is the node plugin of "scenario", its images files (which
// the scenario can stall): it takes over what a previous process
// staged, serves CSI on the socket until SIGTERM and then hands its
// devices over. It says "ready <seconds the start took>" on stdout once
// it serves.
func runPlugin(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("plugin", flag.ContinueOnError)
	socket := fs.String("socket", "/run/csi/csi.sock", "CSI socket")
	images := fs.String("images", "/tmp/images", "image directory")
	config := fs.String("config", "/etc/purerbd/config.json", "cluster config")
	state := fs.String("state", csi.DefaultStateDir, "node state directory")
	key := fs.String("key", "", "the key images accept")
	conns := fs.Int("conns", 2, "NBD connections per device")
	ioTimeout := fs.Duration("io-timeout", 10*time.Second, "kernel request timeout")
	metricsSock := fs.String("metrics", metricsPath, "unix socket to serve the metrics on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	metrics, err := serveMetrics(*metricsSock)
	if err != nil {
		return err
	}
	start := time.Now()
	// The scenario learns of the watchdog's reattaches on stdout.
	log := slog.New(announce{Handler: logger("plugin").Handler()})
	n, err := csi.NewNodeServer(csi.NodeConfig{
		NodeID:            "vm-node",
		Topology:          map[string]string{"topology.purerbd.io/zone": "vm"},
		MaxVolumes:        16,
		ClusterConfigPath: *config,
		Opener:            &fileOpener{dir: *images, key: *key},
		StateDir:          *state,
		Conns:             *conns,
		IOTimeout:         *ioTimeout,
		ReattachTimeout:   2 * time.Minute,
		Logger:            log,
		Metrics:           metrics,
	})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = n.Start(sctx)
	cancel()
	if err != nil {
		return err
	}
	os.Remove(*socket)
	lis, err := net.Listen("unix", *socket)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	csipb.RegisterNodeServer(srv, n)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		log.Info("SIGTERM: handing the devices over")
		srv.GracefulStop()
	}()
	fmt.Printf("ready %.3f\n", time.Since(start).Seconds())
	if err := srv.Serve(lis); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t := time.Now()
	if err := n.Close(cctx); err != nil {
		return err
	}
	fmt.Printf("closed %.3f\n", time.Since(t).Seconds())
	return nil
}

// announce passes records on and prints "reattached VOLUME" on stdout
// for the node's "device reattached" record, "replaced VOLUME" for a
// device's kernel.MsgConnectionReplaced (VOLUME: the record's volumeID,
// "-" when it has none).
type announce struct {
	slog.Handler
	volume string // the volumeID of the logger's attributes
}

func (a announce) Handle(ctx context.Context, r slog.Record) error {
	word := ""
	switch r.Message {
	case "device reattached":
		word = "reattached"
	case kernel.MsgConnectionReplaced:
		word = "replaced"
	}
	if word != "" {
		vol := a.volume
		r.Attrs(func(at slog.Attr) bool {
			if at.Key == "volumeID" {
				vol = at.Value.String()
			}
			return true
		})
		if vol == "" {
			vol = "-"
		}
		fmt.Println(word, vol)
	}
	return a.Handler.Handle(ctx, r)
}

func (a announce) WithAttrs(attrs []slog.Attr) slog.Handler {
	vol := a.volume
	for _, at := range attrs {
		if at.Key == "volumeID" {
			vol = at.Value.String()
		}
	}
	return announce{Handler: a.Handler.WithAttrs(attrs), volume: vol}
}

func (a announce) WithGroup(name string) slog.Handler {
	return announce{Handler: a.Handler.WithGroup(name), volume: a.volume}
}
