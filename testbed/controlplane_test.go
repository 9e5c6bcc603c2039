package testbed

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/agent"
	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/wireauth"
)

// meanIn is a tenant's mean received rate (Mbps) over samples in [from, to).
func meanIn(in *eval.Input, tenant string, from, to time.Duration) float64 {
	sum, n := 0.0, 0
	for _, s := range in.Samples {
		if s.T <= from || s.T > to {
			continue
		}
		r := 0.0
		for i, p := range s.Pairs {
			if in.Pairs[i].Tenant == tenant {
				r += p.Rate / in.UnitScale
			}
		}
		sum += r
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// minIn is a tenant's lowest sample rate (Mbps) in [from, to).
func minIn(in *eval.Input, tenant string, from, to time.Duration) float64 {
	lo := -1.0
	for _, s := range in.Samples {
		if s.T <= from || s.T > to {
			continue
		}
		r := 0.0
		for i, p := range s.Pairs {
			if in.Pairs[i].Tenant == tenant {
				r += p.Rate / in.UnitScale
			}
		}
		if lo < 0 || r < lo {
			lo = r
		}
	}
	return lo
}

// TestTenantAppliedDuringTraffic: on real traffic under ElasticSwitch
// (scenarios/real-join.yaml), B (200 Mbps, 16 connections) fills the
// link; tenant A (600 Mbps, 2 connections on the same sending link) is
// declared to the controller 3 s into the run, when its traffic starts.
// From 2 s later A gets its guarantee (its mean to 7 s at least 90% of
// 600); deleted at 7 s, its limiters are gone from its server within 2 s.
func TestTenantAppliedDuringTraffic(t *testing.T) {
	needRoot(t)
	sc, tp := loadScenario(t, "../scenarios/real-join.yaml")
	prefix := testPrefix(t)
	var applied, deleted time.Duration
	var limitsGone time.Duration = -1
	in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix},
		Mechanism: "elasticswitch", Workload: WorkloadBuiltin, Undeclared: []string{"A"},
		During: func(ctx context.Context, c *RunControl) error {
			if err := c.Sleep(ctx, 3*time.Second); err != nil {
				return err
			}
			if _, err := c.Declare(ctx, "A"); err != nil {
				return err
			}
			applied = time.Since(c.T0)
			if err := c.Sleep(ctx, 7*time.Second); err != nil {
				return err
			}
			if _, err := c.Client().Delete(ctx, api.KindTenant, "A"); err != nil {
				return err
			}
			deleted = time.Since(c.T0)
			v, _ := c.VM("a-tx")
			ns, _ := c.VMNamespace("a-tx")
			for time.Since(c.T0) < deleted+3*time.Second {
				q, err := ns.RootQdisc(v.Dev)
				if err != nil {
					return err
				}
				if q.Kind != "htb" {
					limitsGone = time.Since(c.T0) - deleted
					return nil
				}
				time.Sleep(50 * time.Millisecond)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	before := meanIn(in, "A", time.Second, applied)
	after := meanIn(in, "A", applied+2*time.Second, deleted)
	t.Logf("A: %.0f Mbps before it was declared (t < %.1f s); %.0f in its first second, %.0f from 2 s after (to %.1f s, lowest sample %.0f); B %.0f then; A's limiters gone %v after its deletion",
		before, applied.Seconds(), meanIn(in, "A", applied, applied+time.Second), after, deleted.Seconds(),
		minIn(in, "A", applied+2*time.Second, deleted), meanIn(in, "B", applied+2*time.Second, deleted), limitsGone)
	if after < 0.9*600 {
		t.Errorf("A averaged %.0f Mbps from 2 s after it was declared, want ≥ 90%% of its 600", after)
	}
	if limitsGone < 0 || limitsGone > 2*time.Second {
		t.Errorf("A's limiter on its VM's interface was still there 2 s after A was deleted (gone after %v)", limitsGone)
	}
}

// TestControllerKilledMidRun: the controller is killed (SIGKILL) 3 s into
// a run under ElasticSwitch and started again at 6 s: the agents keep
// enforcing (both tenants at least 90% of their guarantees while it is
// away), and after the restart nothing declared is lost and every agent
// is connected again.
func TestControllerKilledMidRun(t *testing.T) {
	needRoot(t)
	sc, tp := loadScenario(t, "../scenarios/real-connections.yaml")
	prefix := testPrefix(t)
	var report string
	in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix},
		Mechanism: "elasticswitch", Workload: WorkloadBuiltin,
		During: func(ctx context.Context, c *RunControl) error {
			if err := c.Sleep(ctx, 3*time.Second); err != nil {
				return err
			}
			c.KillController()
			if err := c.Sleep(ctx, 6*time.Second); err != nil {
				return err
			}
			if err := c.StartController(ctx); err != nil {
				return fmt.Errorf("restart the controller: %w", err)
			}
			ts, err := c.Client().List(ctx, api.KindTenant)
			if err != nil {
				return err
			}
			if len(ts) != 2 {
				return fmt.Errorf("after the restart the controller has %d tenants, want 2", len(ts))
			}
			start := time.Now()
			for {
				hs, err := c.Client().List(ctx, api.KindHost)
				if err != nil {
					return err
				}
				n := 0
				for _, h := range hs {
					if h.Status.(*api.HostStatus).Connected {
						n++
					}
				}
				if n == len(hs) {
					report = fmt.Sprintf("%d agents connected again %v after the restart", n, time.Since(start).Round(10*time.Millisecond))
					return nil
				}
				if time.Since(start) > 3*time.Second {
					return fmt.Errorf("%d of %d agents connected 3 s after the controller restarted", n, len(hs))
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	a, b := meanIn(in, "A", 3*time.Second, 6*time.Second), meanIn(in, "B", 3*time.Second, 6*time.Second)
	t.Logf("without a controller (3–6 s): A %.0f Mbps (lowest sample %.0f), B %.0f; %s", a, minIn(in, "A", 3*time.Second, 6*time.Second), b, report)
	if a < 0.9*600 || b < 0.9*200 {
		t.Errorf("without a controller A got %.0f (guarantee 600), B %.0f (guarantee 200): below 90%%", a, b)
	}
}

// TestForgedMessagesFromAVM: a process in tenant B's VM sends the sending
// server's agent ElasticSwitch messages claiming to come from the
// receiving server's agent, unsigned and signed with a wrong key, 500 a
// second from 2 s to 8 s, half from the VM's own address and half from
// the receiving agent's, spoofed. Every one is dropped: those from the
// VM's address, which is no peer agent's, as "sender" before they are
// read, the spoofed ones as "auth". Tenant A keeps its guarantee. The controller's ports (operator API,
// agents' gRPC) cannot be reached from the VM at all.
func TestForgedMessagesFromAVM(t *testing.T) {
	needRoot(t)
	sc, tp := loadScenario(t, "../scenarios/real-connections.yaml")
	prefix := testPrefix(t)
	sent, spoofed := 0, 0
	var victim string
	var auth, sender, stale float64
	in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix},
		Mechanism: "elasticswitch", Workload: WorkloadBuiltin,
		During: func(ctx context.Context, c *RunControl) error {
			src, _ := c.VM("a-tx")
			dst, _ := c.VM("a-rx")
			victim = src.Server
			to, _ := c.AgentAddr(src.Server)
			ns, _ := c.VMNamespace("b-tx")
			apiAddr, agentsAddr := c.ControllerAddrs()
			for _, a := range []string{apiAddr, agentsAddr} {
				_, port, _ := net.SplitHostPort(a)
				for _, host := range []string{"127.0.0.1", to.Addr().String()} {
					err := ns.Do(func() error {
						conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 500*time.Millisecond)
						if err == nil {
							conn.Close()
						}
						return err
					})
					if err == nil {
						return fmt.Errorf("VM b-tx reached a controller port at %s:%s", host, port)
					}
				}
			}
			if err := c.Sleep(ctx, 2*time.Second); err != nil {
				return err
			}
			var conn *net.UDPConn
			if err := ns.Do(func() (err error) {
				conn, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
				return err
			}); err != nil {
				return fmt.Errorf("a socket in VM b-tx: %w", err)
			}
			defer conn.Close()
			// a raw socket, to send from the receiving server's agent's
			// own address and port
			from, _ := c.AgentAddr(dst.Server)
			var raw int
			if err := ns.Do(func() (err error) {
				raw, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
				return err
			}); err != nil {
				return fmt.Errorf("a raw socket in VM b-tx: %w", err)
			}
			defer syscall.Close(raw)
			wrong := make([]byte, 32)
			_, _ = rand.Read(wrong)
			body := map[string]any{"kind": "elasticswitch.congestion.v1", "pairs": []map[string]any{{"src": "a-tx", "dst": "a-rx", "lost": 1e6}}}
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for seq := uint64(1); time.Since(c.T0) < 8*time.Second; seq++ {
				// any epoch and sequence: the sender's start far in the
				// future, the largest sequence, or both
				epoch, sq := time.Now().UnixNano()+1e18, seq
				if seq%3 == 1 {
					epoch, sq = time.Now().UnixNano(), math.MaxUint64-seq
				}
				sealed, err := agent.EncodeMessage(wrong, dst.Server, src.Server, epoch, sq, body)
				if err != nil {
					return err
				}
				dg := sealed
				if seq%2 == 0 { // unsigned: the envelope alone
					dg = sealed[:len(sealed)-wireauth.TagSize]
				}
				var err2 error
				if seq%4 < 2 { // from the VM's own address
					_, err2 = conn.Write(dg)
				} else { // from the peer agent's address, spoofed
					err2 = sendSpoofed(raw, from, to, dg)
					spoofed++
				}
				if err2 == nil {
					sent++
				}
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
			// The agent's last report may be up to a second old.
			time.Sleep(1200 * time.Millisecond)
			hs, err := c.Client().Get(ctx, api.KindHost, victim)
			if err != nil {
				return err
			}
			auth = float64(hs.Status.(*api.HostStatus).Dropped[agent.DropAuth])
			sender = float64(hs.Status.(*api.HostStatus).Dropped[agent.DropSender])
			stale = float64(hs.Status.(*api.HostStatus).Dropped[agent.DropStale])
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	a := meanIn(in, "A", 2*time.Second, 8*time.Second)
	t.Logf("%d forged datagrams sent to %s's agent (%d from the peer agent's spoofed address), with epochs 1e18 ns ahead or sequences near 2^64; it dropped %.0f from an address that is no peer's (sender), %.0f as unauthenticated and %.0f genuine ones as stale; A %.0f Mbps meanwhile (lowest sample %.0f)",
		sent, victim, spoofed, sender, auth, stale, a, minIn(in, "A", 2*time.Second, 8*time.Second))
	// Those from the VM's own address are dropped before they are read,
	// those from the peer agent's address when their tag does not verify.
	if sent == 0 || sender+auth < float64(sent) || auth < float64(spoofed) {
		t.Errorf("%d forged datagrams sent (%d spoofed), %.0f dropped as from no peer and %.0f as unauthenticated: want every one, the spoofed ones as unauthenticated", sent, spoofed, sender, auth)
	}
	if stale > 0 {
		t.Errorf("%.0f genuine messages dropped as stale after the forged ones: a peer was locked out", stale)
	}
	if a < 0.9*600 {
		t.Errorf("A averaged %.0f Mbps while forged messages arrived, want ≥ 90%% of 600", a)
	}
}

// sendSpoofed sends payload as one UDP datagram from the address and
// port from (not the sender's own) to to, over a raw IPv4 socket
// (IPPROTO_RAW: the header is ours). The UDP checksum is left 0 (none).
func sendSpoofed(raw int, from, to netip.AddrPort, payload []byte) error {
	n := 28 + len(payload)
	b := make([]byte, n)
	b[0] = 0x45 // IPv4, 20-byte header
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	b[8] = 64 // TTL
	b[9] = syscall.IPPROTO_UDP
	s, d := from.Addr().As4(), to.Addr().As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[10:], ipChecksum(b[:20]))
	binary.BigEndian.PutUint16(b[20:], from.Port())
	binary.BigEndian.PutUint16(b[22:], to.Port())
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	copy(b[28:], payload)
	return syscall.Sendto(raw, b, 0, &syscall.SockaddrInet4{Addr: d})
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// TestAgentStartsWithoutController: on real-connections under
// ElasticSwitch (A 600 and B 200 Mbps, both sent from s1) the controller
// is killed at 2 s, s1's agent is stopped (SIGTERM) at 3 s and started
// again at 4 s with no controller to answer it; the controller comes
// back at 9 s. The new agent starts from the model its predecessor kept
// (--state-dir) at once: from 5 s to 8 s the tenants share the link as
// before the faults (with no agent, the failsafe limits would hold them
// at their guarantees, 800 Mbps in all), and neither falls below 90% of
// its guarantee in any second.
func TestAgentStartsWithoutController(t *testing.T) {
	needRoot(t)
	sc, tp := loadScenario(t, "../scenarios/real-connections.yaml")
	prefix := testPrefix(t)
	in, err := Run(context.Background(), sc, tp, RunOptions{Binary: bulkheadBin, Options: Options{Prefix: prefix},
		Mechanism: "elasticswitch", Workload: WorkloadBuiltin,
		During: func(ctx context.Context, c *RunControl) error {
			if err := c.Sleep(ctx, 2*time.Second); err != nil {
				return err
			}
			c.KillController()
			if err := c.Sleep(ctx, 3*time.Second); err != nil {
				return err
			}
			if err := c.SignalAgent("s1", syscall.SIGTERM); err != nil {
				return err
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := c.WaitAgent(wctx, "s1"); err != nil {
				return fmt.Errorf("the agent of s1 did not exit 2 s after SIGTERM: %w", err)
			}
			if err := c.Sleep(ctx, 4*time.Second); err != nil {
				return err
			}
			if err := c.StartAgent("s1"); err != nil {
				return err
			}
			if err := c.Sleep(ctx, 9*time.Second); err != nil {
				return err
			}
			return c.StartController(ctx)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	requireGone(t, prefix)
	a, b := meanIn(in, "A", 5*time.Second, 8*time.Second), meanIn(in, "B", 5*time.Second, 8*time.Second)
	t.Logf("before the faults (1–2 s): A %.0f Mbps, B %.0f; agent away (3–4 s): A %.0f, B %.0f; the agent started again with no controller (5–8 s): A %.0f, B %.0f",
		meanIn(in, "A", time.Second, 2*time.Second), meanIn(in, "B", time.Second, 2*time.Second),
		meanIn(in, "A", 3*time.Second, 4*time.Second), meanIn(in, "B", 3*time.Second, 4*time.Second), a, b)
	if a+b < 850 {
		t.Errorf("A and B got %.0f Mbps from 5 s to 8 s, want ≥ 850: the agent started again did not enforce ElasticSwitch without a controller (the failsafe's guarantees alone give 800)", a+b)
	}
	for tenant, g := range map[string]float64{"A": 600, "B": 200} {
		if lo, at := worstWindow(in, tenant, time.Duration(sc.Duration)); lo < 0.9*g {
			t.Errorf("%s: %.0f Mbps in the window from %v, below 90%% of its %.0f guarantee", tenant, lo, at, g)
		}
	}
}
