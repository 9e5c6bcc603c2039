package dataplane

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRouteMetrics: a route's rto_min and congestion control reach the
// kernel as route metrics (what `ip route` shows), and an unknown
// congestion control is refused with the route named.
func TestRouteMetrics(t *testing.T) {
	needRoot(t)
	prefix := newPrefix(t)
	a := testNS(t, prefix, "a")
	h := testNS(t, prefix, "h")
	if err := h.AddVeth(prefix+"h", a, prefix+"a"); err != nil {
		t.Fatal(err)
	}
	if err := a.AddAddr(prefix+"a", netip.MustParsePrefix("10.200.0.1/31")); err != nil {
		t.Fatal(err)
	}
	r := Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: netip.MustParseAddr("10.200.0.0"), Dev: prefix + "a",
		RTOMin: 5 * time.Millisecond, CongestionControl: "reno"}
	if err := a.AddRoute(r); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "-n", a.Name, "route", "show", "default").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v: %s", err, out)
	}
	for _, want := range []string{"rto_min lock 5ms", "congctl reno"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("route %q: want %q", strings.TrimSpace(string(out)), want)
		}
	}
	r.CongestionControl = "nosuchcc"
	err = a.AddRoute(r)
	if err == nil || !strings.Contains(err.Error(), "route 0.0.0.0/0") {
		t.Errorf("unknown congestion control: got %v, want an error naming the route", err)
	}
}
