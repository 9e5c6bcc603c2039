package linux

import (
	"context"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// needRoot fails (never skips) without root: CI runs as root, and these
// tests must run there.
func needRoot(t *testing.T) {
	t.Helper()
	if err := dataplane.RequireRoot(); err != nil {
		t.Fatalf("integration test needs root: %v", err)
	}
}

// server makes a server namespace with a VM's veth (PREFIXv, peer in a VM
// namespace) and an IFB (PREFIXrx) with an empty HTB, as the testbed
// does; everything is removed when the test ends.
func server(t *testing.T) (prefix string, srv *dataplane.NS) {
	t.Helper()
	prefix = dataplane.RandomPrefix("dl")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := dataplane.Cleanup(ctx, prefix); err != nil {
			t.Errorf("cleanup %s: %v", prefix, err)
		}
		if left, err := dataplane.Find(prefix); err != nil || !left.Empty() {
			t.Errorf("run %s left %v (%v)", prefix, left, err)
		}
	})
	mk := func(name string) *dataplane.NS {
		n, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+name, dataplane.NSOptions{Forwarding: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	srv, vm := mk("s"), mk("v")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(srv.AddVeth(prefix+"v", vm, prefix+"vm"))
	must(srv.AddIFB(prefix + "rx"))
	must(srv.ReplaceHTB(prefix+"rx", dataplane.HTB{Handle: dataplane.TCHandle(1, 0), Parent: 0xFFFFFFFF, DirectQlen: dataplane.DefaultTxQLen}))
	return prefix, srv
}

// TestScheduler: the per-VM HTB scheduler on an IFB: its classes carry
// the VMs' shares and limits; a VM limit with no scheduler installs one
// that only limits; new VMs rebuild an installed scheduler; a tree
// deleted behind its back is built anew by the next limit; removing it
// leaves no class.
func TestScheduler(t *testing.T) {
	needRoot(t)
	prefix, srv := server(t)
	h, err := NewHost(Config{NS: srv, RXIFB: prefix + "rx"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Scheduler(mech.Egress) != nil {
		t.Fatal("an egress scheduler without its device")
	}
	s := h.Scheduler(mech.Ingress)
	a, b := netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.3")
	if err := s.SetVMs(map[string]netip.Addr{"a": a}); err != nil {
		t.Fatal(err)
	}
	if cs, err := s.Counters(); err != nil || cs != nil || s.Installed() {
		t.Fatalf("before anything is set: %v, %v, installed %v", cs, err, s.Installed())
	}
	if err := s.SetLimit("a", 50e6); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Counters()
	if err != nil || !s.Installed() || cs["a"].Ceil != 50e6 {
		t.Fatalf("a limit alone: %+v, %v, installed %v; want a's ceiling at 50 Mbit/s", cs, err, s.Installed())
	}
	if err := s.Set(1e9, map[string]float64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(1e9, map[string]float64{"b": 1}); err == nil {
		t.Error("a weight for a VM not on the host accepted")
	}
	if err := s.SetVMs(map[string]netip.Addr{"a": a, "b": b}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(1e9, map[string]float64{"a": 3, "b": 1}); err != nil {
		t.Fatal(err)
	}
	cs, err = s.Counters()
	if err != nil {
		t.Fatal(err)
	}
	// a: 3/4 of 1 Gbit/s capped by its 50 Mbit/s limit; b: 1/4
	if cs["a"].Rate != 50e6 || cs["a"].Ceil != 50e6 || cs["b"].Rate != 250e6 || cs["b"].Ceil != 1e9 {
		t.Errorf("classes %+v", cs)
	}
	// the tree is deleted behind the scheduler's back
	if err := srv.DeleteRootQdisc(prefix + "rx"); err != nil {
		t.Fatal(err)
	}
	if cs, _ := s.Counters(); cs["a"].Rate != 0 {
		t.Fatalf("a deleted tree reads %+v", cs)
	}
	if err := s.SetLimit("b", 20e6); err != nil {
		t.Fatalf("a limit on a deleted tree: %v", err)
	}
	if cs, err := s.Counters(); err != nil || cs["a"].Ceil != 50e6 || cs["b"].Ceil != 20e6 {
		t.Errorf("rebuilt tree: %+v, %v", cs, err)
	}
	// b leaves
	if err := s.SetVMs(map[string]netip.Addr{"a": a}); err != nil {
		t.Fatal(err)
	}
	if cs, err := s.Counters(); err != nil || len(cs) != 1 || cs["a"].Ceil != 50e6 {
		t.Errorf("after b left: %+v, %v", cs, err)
	}
	if err := s.SetLimit("a", mech.Unlimited); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(mech.Unlimited, nil); err != nil {
		t.Fatal(err)
	}
	all, err := srv.ClassCounters(prefix + "rx")
	if err != nil || len(all) != 0 || s.Installed() {
		t.Errorf("after removal: classes %v, %v, installed %v", all, err, s.Installed())
	}
}

// TestSchedulerRemovalKeepsLimits: removing a scheduler while a VM limit
// is finite leaves a tree that only limits (the limit never lapses);
// once no limit is finite, removing it leaves no class.
func TestSchedulerRemovalKeepsLimits(t *testing.T) {
	needRoot(t)
	prefix, srv := server(t)
	s := NewScheduler(srv, prefix+"rx", mech.Ingress, nil)
	if err := s.SetVMs(map[string]netip.Addr{"a": netip.MustParseAddr("10.200.0.1"), "b": netip.MustParseAddr("10.200.0.3")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(1e9, map[string]float64{"a": 3, "b": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLimit("a", 50e6); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(mech.Unlimited, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Counters()
	if err != nil || !s.Installed() || cs["a"].Ceil != 50e6 || cs["b"].Ceil != dataplane.MaxRate {
		t.Fatalf("after the scheduler was removed: %+v, %v, installed %v; want a's 50 Mbit/s limit alone", cs, err, s.Installed())
	}
	if err := s.SetLimit("a", mech.Unlimited); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(mech.Unlimited, nil); err != nil {
		t.Fatal(err)
	}
	if all, err := srv.ClassCounters(prefix + "rx"); err != nil || len(all) != 0 || s.Installed() {
		t.Errorf("removed without limits: classes %v, %v, installed %v", all, err, s.Installed())
	}
}

// TestHost: a VM attached gets the limiters configured for it (none for
// one configured without); a VM the server has nothing for is refused;
// Detach removes its pair limiters, and the VM rejoining gets them back;
// the devices' counters are read; Close closes the loss counter and
// releases once.
func TestHost(t *testing.T) {
	needRoot(t)
	prefix, srv := server(t)
	tx, err := dataplane.NewLimiter(srv, dataplane.LimiterConfig{Dev: prefix + "v"})
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	h, err := NewHost(Config{NS: srv, VMs: map[string]Limiters{"a": {TX: tx}, "c": {}}, Release: func() { released++ }})
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr("10.200.0.1")
	p, err := h.Attach(datapath.VM{Name: "a", Addr: a, Device: prefix + "v"})
	if err != nil || p.TX == nil || p.RX != nil {
		t.Fatalf("attach a: %+v, %v", p, err)
	}
	if q, err := h.Attach(datapath.VM{Name: "c", Addr: netip.MustParseAddr("10.200.0.5")}); err != nil || q.TX != nil || q.RX != nil {
		t.Errorf("attach a VM configured without limiters: %+v, %v", q, err)
	}
	if _, err := h.Attach(datapath.VM{Name: "z", Addr: netip.MustParseAddr("10.200.0.9")}); err == nil || !strings.Contains(err.Error(), "z") {
		t.Errorf("attach of a VM the server has nothing for: %v, want an error naming it", err)
	}
	if _, err := h.Attach(datapath.VM{Name: "x", Addr: netip.MustParseAddr("::1")}); err == nil {
		t.Error("an IPv6 VM attached")
	}
	pr := datapath.Pair{Src: a, Dst: netip.MustParseAddr("10.200.0.3")}
	if err := p.TX.SetPairRate(pr, 10e6); err != nil {
		t.Fatal(err)
	}
	devs, err := h.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := devs[prefix+"v"]; !ok {
		t.Errorf("devices %v: no %sv", devs, prefix)
	}
	if err := h.Detach("a"); err != nil {
		t.Fatal(err)
	}
	if cs, err := tx.Counters(); err != nil || len(cs) != 0 || !math.IsInf(tx.PairRate(pr), 1) {
		t.Errorf("after detach: %v, %v", cs, err)
	}
	// a leaves and rejoins: its limiter is its own again
	p, err = h.Attach(datapath.VM{Name: "a", Addr: a, Device: prefix + "v"})
	if err != nil || p.TX == nil {
		t.Fatalf("a rejoined: %+v, %v", p, err)
	}
	if err := p.TX.SetPairRate(pr, 20e6); err != nil || tx.PairRate(pr) != 20e6 {
		t.Errorf("a's pair after it rejoined: %v, rate %v", err, tx.PairRate(pr))
	}
	if h.Loss() != nil {
		t.Error("a loss counter without one configured")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil || released != 1 {
		t.Errorf("second close: %v, released %d times", err, released)
	}
}

// TestRates: the bounds of the rates the data path holds, as the agent
// knows them (datapath.MinRate, MaxRate), are the netlink toolkit's.
func TestRates(t *testing.T) {
	if datapath.MinRate != dataplane.MinRate || datapath.MaxRate != dataplane.MaxRate {
		t.Errorf("datapath holds rates in [%v, %v], dataplane in [%v, %v]", datapath.MinRate, datapath.MaxRate, dataplane.MinRate, dataplane.MaxRate)
	}
}
