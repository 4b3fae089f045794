// Package sanitytest runs the CSI sanity suite (kubernetes-csi/csi-test
// v5, pkg/sanity) against a purerbd plugin's Identity and Controller
// services, for tests.
//
// The suite sends its cleanup calls (NodeUnpublishVolume,
// NodeGetCapabilities) to a node service even when it tests only the
// controller. Without Options.NodeSocket, Run points the suite's node
// address at FakeNode, a fake that owns no volumes, and skips the "Node
// Service" specs; the Identity specs then run against both the plugin
// (controller address) and the fake (node address). With NodeSocket (a
// plugin serving the node service), every spec runs.
package sanitytest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Options configure a sanity run.
type Options struct {
	// ControllerSocket is the unix socket of the plugin under test.
	ControllerSocket string
	// NodeSocket, if set, is the unix socket of a plugin serving the
	// node service; the "Node Service" specs then run too.
	NodeSocket string
	// DriverName is what the fake node reports from GetPluginInfo.
	DriverName string
	// Parameters are the StorageClass parameters of every volume.
	Parameters map[string]string
	// SnapshotParameters are the VolumeSnapshotClass parameters.
	SnapshotParameters map[string]string
	// Secrets go into every call that carries secrets.
	Secrets map[string]string
	// ValidVolumeID returns a well-formed ID of a volume that does not
	// exist.
	ValidVolumeID func() string
	// VolumeSize is the size of test volumes; 64 MiB if zero.
	VolumeSize int64
	// Title names the suite in reports.
	Title string
}

// Run runs the suite; it can run once per test binary (Ginkgo's rule).
func Run(t *testing.T, o Options) {
	dir, err := os.MkdirTemp("", "sanity")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	nodeSock := o.NodeSocket
	if nodeSock == "" {
		nodeSock = filepath.Join(dir, "node.sock")
		stop, err := serveFakeNode(nodeSock, o.DriverName, o.ControllerSocket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}

	secretsFile := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secretsFile, []byte(secretsYAML(o.Secrets)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix:" + nodeSock
	cfg.ControllerAddress = "unix:" + o.ControllerSocket
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.SecretsFile = secretsFile
	cfg.TestVolumeParameters = o.Parameters
	cfg.TestSnapshotParameters = o.SnapshotParameters
	cfg.TestVolumeSize = o.VolumeSize
	if cfg.TestVolumeSize == 0 {
		cfg.TestVolumeSize = 64 << 20
	}
	cfg.TestVolumeExpandSize = 2 * cfg.TestVolumeSize
	// a VolumeAttributesClass's parameters: librbd's QoS options
	cfg.TestVolumeMutableParameters = map[string]string{"rbd_qos_iops_limit": "5000", "rbd_qos_bps_limit": "1073741824"}
	cfg.IDGen = idGen{valid: o.ValidVolumeID}
	cfg.IdempotentCount = 3

	sc := sanity.GinkgoTest(&cfg)
	var ran, skipped, failed []string
	ginkgo.ReportAfterEach(func(r ginkgo.SpecReport) {
		name := r.FullText()
		switch {
		case r.State.Is(types.SpecStatePassed):
			ran = append(ran, name)
		case r.State.Is(types.SpecStateSkipped | types.SpecStatePending):
			why := strings.TrimSpace(r.Failure.Message)
			if why == "" {
				why = "filtered out"
			}
			skipped = append(skipped, name+" ("+why+")")
		default:
			failed = append(failed, name)
		}
	})
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	if o.NodeSocket == "" {
		suite.SkipStrings = append(suite.SkipStrings, "Node Service")
	}
	reporter.NoColor = true
	title := o.Title
	if title == "" {
		title = "purerbd CSI sanity"
	}
	ginkgo.RunSpecs(t, title, suite, reporter)
	sc.Finalize()
	sort.Strings(ran)
	sort.Strings(skipped)
	t.Logf("sanity: %d specs passed, %d failed, %d skipped", len(ran), len(failed), len(skipped))
	for _, n := range ran {
		t.Logf("passed:  %s", n)
	}
	for _, n := range skipped {
		t.Logf("skipped: %s", n)
	}
	for _, n := range failed {
		t.Logf("FAILED:  %s", n)
	}
}

func secretsYAML(s map[string]string) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, field := range []string{"CreateVolumeSecret", "DeleteVolumeSecret", "ControllerValidateVolumeCapabilitiesSecret",
		"CreateSnapshotSecret", "DeleteSnapshotSecret", "ControllerExpandVolumeSecret", "ControllerModifyVolumeSecret", "ListSnapshotsSecret", "GetSnapshotSecret",
		"NodeStageVolumeSecret", "NodePublishVolumeSecret"} {
		fmt.Fprintf(&b, "%s:\n", field)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %q\n", k, s[k])
		}
	}
	return b.String()
}

type idGen struct{ valid func() string }

func (g idGen) GenerateUniqueValidVolumeID() string { return g.valid() }
func (g idGen) GenerateInvalidVolumeID() string     { return "fake-vol-id" }
func (g idGen) GenerateUniqueValidNodeID() string {
	v := g.valid()
	return "node-" + v[len(v)-8:]
}
func (g idGen) GenerateInvalidNodeID() string { return "fake-node-id" }

// ServeFakeNode serves FakeNode and a matching Identity service on a unix
// socket until stop is called.
func ServeFakeNode(path, driverName string) (stop func(), err error) {
	return serveFakeNode(path, driverName, "")
}

// serveFakeNode is ServeFakeNode whose Identity service also reports the
// GroupController service when the plugin at controllerSocket does: the
// suite asks the node address which plugin services there are before it
// runs the GroupController specs, and one plugin's capabilities are the
// same on every endpoint.
func serveFakeNode(path, driverName, controllerSocket string) (stop func(), err error) {
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	csipb.RegisterIdentityServer(srv, fakeIdentity{name: driverName, controller: controllerSocket})
	csipb.RegisterNodeServer(srv, FakeNode{})
	go srv.Serve(lis)
	return srv.Stop, nil
}

type fakeIdentity struct {
	csipb.UnimplementedIdentityServer
	name       string
	controller string // the plugin's socket, if any
}

func (f fakeIdentity) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: f.name, VendorVersion: "fake-node"}, nil
}

func (f fakeIdentity) GetPluginCapabilities(ctx context.Context, _ *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	if f.controller == "" {
		return &csipb.GetPluginCapabilitiesResponse{}, nil
	}
	conn, err := grpc.NewClient("unix:"+f.controller, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	res, err := csipb.NewIdentityClient(conn).GetPluginCapabilities(ctx, &csipb.GetPluginCapabilitiesRequest{})
	if err != nil {
		return nil, err
	}
	out := &csipb.GetPluginCapabilitiesResponse{}
	for _, c := range res.GetCapabilities() {
		if c.GetService().GetType() == csipb.PluginCapability_Service_GROUP_CONTROLLER_SERVICE {
			out.Capabilities = append(out.Capabilities, c)
		}
	}
	return out, nil
}

func (fakeIdentity) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// FakeNode is a fake node service that has no volumes: it answers the
// suite's cleanup calls (nothing published here) and nothing else.
type FakeNode struct {
	csipb.UnimplementedNodeServer
}

// NodeGetCapabilities reports no capabilities.
func (FakeNode) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{}, nil
}

// NodeUnpublishVolume reports that nothing is published.
func (FakeNode) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	return nil, status.Errorf(codes.NotFound, "fake node: volume %q is not published here", r.GetVolumeId())
}

// NodeUnstageVolume reports that nothing is staged.
func (FakeNode) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	return nil, status.Errorf(codes.NotFound, "fake node: volume %q is not staged here", r.GetVolumeId())
}
