package appfront_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/agent/appfront"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/proxy/appliancetest"
)

// TestFront: a host's front steers its VMs' connections to a real Redis
// declared at 10.9.9.9:6379, relays them (SET and GET answered in order),
// holds the flow to the controller's allocation, measures it on the
// controller's path, removes steering an earlier agent left for an
// address no appliance has, and stops steering when closed with remove.
func TestFront(t *testing.T) {
	redis := appliancetest.StartRedis(t)
	ep := netip.MustParseAddrPort("10.9.9.9:6379")
	st := fake.NewSteering(map[netip.AddrPort]string{ep: redis}, map[netip.Addr][]netip.Addr{netip.MustParseAddr("10.9.9.8"): {netip.MustParseAddr("127.0.0.1")}})
	f, err := appfront.New(appfront.Config{Host: "h1", Steering: st})
	if err != nil {
		t.Fatal(err)
	}
	m := &model.Model{
		Appliances: []model.Appliance{
			{Name: "kv", Server: "h2", Model: model.ModelKV, Address: ep.Addr().String(), Port: int(ep.Port()), Protocol: model.ProtoRedis},
			{Name: "simonly", Server: "h2", Model: model.ModelKV},
		},
		Tenants: []model.Tenant{{Name: "A", VMs: []model.VM{
			{Name: "a1", Tenant: "A", In: 1e8, Out: 1e8, Host: "h1", Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
			{Name: "a2", Tenant: "A", In: 1e8, Out: 1e8, Host: "h2", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}},
		}}},
	}
	m.ApplyDefaults()
	id := mech.FlowID{Src: "a1", Dst: "kv"}
	path := []mech.PathElem{{Resource: 0, Role: mech.Forward}, {Resource: 5, Role: mech.Appliance}, {Resource: 1, Role: mech.Reverse}}
	if err := f.Update(context.Background(), m, map[mech.FlowID][]mech.PathElem{id: path}); err != nil {
		t.Fatal(err)
	}
	defer f.Close(false)
	steered, _ := st.Steered()
	if len(steered) != 1 || !slices.Equal(steered[ep.Addr()], []netip.Addr{netip.MustParseAddr("127.0.0.1")}) {
		t.Fatalf("steered %v, want a1's address to %v only (the earlier agent's 10.9.9.8 removed)", steered, ep.Addr())
	}

	// 50 SETs of 100 bytes at 10 requests/s of appliance tokens: the
	// first burst passes, then the bucket holds the flow.
	perReq := 8000.0 // Pulsar Fig. 6(b): a request of at most 8 KB costs 8K tokens
	f.SetActions(map[mech.FlowID][]float64{id: {1e9, 10 * perReq, 1e9}}, 0, nil)
	conn, err := net.Dial("tcp", st.ListenAddr(ep))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	val := strings.Repeat("x", 100)
	start := time.Now()
	const n = 25
	for i := range n {
		fmt.Fprintf(conn, "*3\r\n$3\r\nSET\r\n$2\r\nk%d\r\n$100\r\n%s\r\n", i%10, val)
	}
	fmt.Fprintf(conn, "*2\r\n$3\r\nGET\r\n$2\r\nk3\r\n")
	for i := range n {
		line, err := rd.ReadString('\n')
		if err != nil || line != "+OK\r\n" {
			t.Fatalf("reply %d: %q, %v", i, line, err)
		}
	}
	if line, _ := rd.ReadString('\n'); line != "$100\r\n" {
		t.Fatalf("GET reply %q", line)
	}
	took := time.Since(start)
	// The bucket holds 1 s of its rate (10 requests) at first; the other
	// 16 wait for refills at 10/s.
	if took < 1200*time.Millisecond || took > 3*time.Second {
		t.Errorf("26 requests at 10/s with a 10-request bucket took %v, want about 1.6 s", took)
	}
	obs := f.Collect()
	if len(obs) != 1 || obs[0].Flow != id || len(obs[0].Used) != len(path) {
		t.Fatalf("observations %+v", obs)
	}
	if obs[0].Used[1] <= 0 || obs[0].Used[0] <= 0 || obs[0].Used[2] <= 0 {
		t.Errorf("used %v: every element charged", obs[0].Used)
	}

	if err := f.Close(true); err != nil {
		t.Fatal(err)
	}
	if steered, _ := st.Steered(); len(steered) != 0 {
		t.Errorf("after Close(remove): still steered %v", steered)
	}
}

// breakingSteering is a loopback steering whose first listeners fail:
// their Accept returns an error proxy.Listen does not retry.
type breakingSteering struct {
	*fake.Steering
	broken atomic.Int32 // listeners left to break
}

func (s *breakingSteering) Listen(app netip.AddrPort) (net.Listener, error) {
	ln, err := s.Steering.Listen(app)
	if err != nil || s.broken.Add(-1) < 0 {
		return ln, err
	}
	return brokenListener{ln}, nil
}

type brokenListener struct{ net.Listener }

func (brokenListener) Accept() (net.Conn, error) { return nil, errors.New("listener broken") }

// TestFrontRestartsListener: an appliance's listener that stops with an
// error is opened again (twice here), and the VM's connections are
// relayed.
func TestFrontRestartsListener(t *testing.T) {
	redis := appliancetest.StartRedis(t)
	ep := netip.MustParseAddrPort("10.9.9.9:6379")
	st := &breakingSteering{Steering: fake.NewSteering(map[netip.AddrPort]string{ep: redis}, nil)}
	st.broken.Store(2)
	f, err := appfront.New(appfront.Config{Host: "h1", Steering: st})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(false)
	m := &model.Model{
		Appliances: []model.Appliance{{Name: "kv", Server: "h2", Model: model.ModelKV, Address: ep.Addr().String(), Port: int(ep.Port()), Protocol: model.ProtoRedis}},
		Tenants: []model.Tenant{{Name: "A", VMs: []model.VM{
			{Name: "a1", Tenant: "A", In: 1e8, Out: 1e8, Host: "h1", Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		}}},
	}
	m.ApplyDefaults()
	id := mech.FlowID{Src: "a1", Dst: "kv"}
	path := []mech.PathElem{{Resource: 0, Role: mech.Forward}, {Resource: 5, Role: mech.Appliance}, {Resource: 1, Role: mech.Reverse}}
	if err := f.Update(context.Background(), m, map[mech.FlowID][]mech.PathElem{id: path}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		reply, err := ping(st.ListenAddr(ep))
		if err == nil && reply == "+PONG\r\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PONG through the front: %q %v (broken listeners left: %d)", reply, err, st.broken.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := st.broken.Load(); n > 0 {
		t.Fatalf("answered with %d broken listeners left", n)
	}
}

// ping sends PING to addr and returns the reply's first line.
func ping(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}
