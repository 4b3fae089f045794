package netns

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// TestNamespace creates a namespace, checks what is inside and what the
// root namespace sees, and that Close leaves nothing behind.
func TestNamespace(t *testing.T) {
	shorttier.Skip(t, "root and network namespaces")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := Create(ctx, Options{Taps: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Create(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Subnet == b.Subnet || a.Name == b.Name {
		t.Fatalf("two namespaces share %s / %s", a.Subnet, a.Name)
	}
	out, err := a.Command(ctx, "ip", "-br", "addr").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"lo ", a.Bridge, a.HostIP + "/24", "tap0", "tap1"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("namespace addresses lack %q:\n%s", want, out)
		}
	}
	// No way out: the namespace has no default route.
	if out, err := a.Command(ctx, "ip", "route", "get", "192.0.2.1").CombinedOutput(); err == nil {
		t.Fatalf("the namespace routes to 192.0.2.1: %s", out)
	}
	// The root namespace blackholes the subnet: a connect fails locally.
	rt, _ := a.output(ctx, "route", "show", "root", a.Subnet)
	if !strings.Contains(string(rt), "blackhole") {
		t.Fatalf("root route for %s: %q", a.Subnet, rt)
	}
	if c, err := net.DialTimeout("tcp", a.HostIP+":3300", 2*time.Second); err == nil {
		c.Close()
		t.Fatal("connected to the namespace's address from the root namespace")
	} else {
		t.Logf("root namespace connect: %v", err)
	}
	name, subnet := a.Name, a.Subnet
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
		t.Fatalf("namespace %s left: %v", name, err)
	}
	if rt, _ := b.output(ctx, "route", "show", "root", subnet); strings.TrimSpace(string(rt)) != "" {
		t.Fatalf("route left: %s", rt)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
