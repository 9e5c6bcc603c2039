package dataplane

import (
	"context"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestSteering: with a steering rule, VM a's connections to the appliance
// b's address arrive at a listener on h (on b's address, IP_TRANSPARENT),
// which sees a's address as the peer and reaches the real b itself from
// h; without the rule (deleted), a's connections reach b directly again.
// The rules and the local route are listed as made and are gone after
// deletion.
func TestSteering(t *testing.T) {
	needRoot(t)
	c := newChain(t, newPrefix(t))
	vm, app := netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.3")
	ep := netip.AddrPortFrom(app, 6399)

	// The real appliance: an echo server in b that says who connected.
	real, err := c.b.ListenTransparent(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	go serveWho(real, "real")

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.h.AddSteerLocal(app))
	must(c.h.AddSteerRule(SteerRule{VM: vm, App: app}))
	must(c.h.AddSteerRule(SteerRule{VM: vm, App: app})) // idempotent
	proxy, err := c.h.ListenTransparent(ep)
	must(err)
	defer proxy.Close()
	go serveWho(proxy, "proxy")

	if got := ask(t, c.a, ep); got != "proxy 10.200.0.1" {
		t.Errorf("a's connection to %v reached %q, want the proxy on h seeing a's address", ep, got)
	}
	// h's own connection to the appliance is not steered.
	conn, err := c.h.DialTCP(context.Background(), netip.Addr{}, ep)
	must(err)
	if got := readAll(t, conn); got != "real 10.200.0.2" {
		t.Errorf("h's connection reached %q, want the real appliance seeing h's address", got)
	}
	rules, err := c.h.SteerRules()
	must(err)
	if !slices.Equal(rules, []SteerRule{{VM: vm, App: app}}) {
		t.Errorf("rules %v", rules)
	}
	locals, err := c.h.SteerLocals()
	must(err)
	if !slices.Equal(locals, []netip.Addr{app}) {
		t.Errorf("steered destinations %v", locals)
	}

	must(c.h.DeleteSteerRule(SteerRule{VM: vm, App: app}))
	must(c.h.DeleteSteerRule(SteerRule{VM: vm, App: app})) // absent: fine
	must(c.h.DeleteSteerLocal(app))
	must(c.h.DeleteSteerLocal(app))
	if got := ask(t, c.a, ep); got != "real 10.200.0.1" {
		t.Errorf("after the rule's removal a reached %q, want the real appliance", got)
	}
	if rules, _ := c.h.SteerRules(); len(rules) != 0 {
		t.Errorf("rules left: %v", rules)
	}
	if locals, _ := c.h.SteerLocals(); len(locals) != 0 {
		t.Errorf("local routes left: %v", locals)
	}
}

// serveWho answers every connection with its name and the peer's address.
func serveWho(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		_, _ = io.WriteString(c, name+" "+ap.Addr().Unmap().String())
		c.Close()
	}
}

func ask(t *testing.T, from *NS, ep netip.AddrPort) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := from.DialTCP(ctx, netip.Addr{}, ep)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, c)
}

func readAll(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
