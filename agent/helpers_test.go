package agent

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
)

// vmSpec is a VM of a test model: its tenant, host, address and hose
// guarantees.
type vmSpec struct {
	name, tenant, host, addr string
	in, out                  float64
}

// testModel builds a model of the VMs, tenants in order of first
// appearance; VM x's device is "x-dev".
func testModel(vms ...vmSpec) *model.Model {
	m := &model.Model{}
	idx := map[string]int{}
	for _, v := range vms {
		i, ok := idx[v.tenant]
		if !ok {
			i = len(m.Tenants)
			idx[v.tenant] = i
			m.Tenants = append(m.Tenants, model.Tenant{Name: v.tenant})
		}
		m.Tenants[i].VMs = append(m.Tenants[i].VMs, model.VM{Name: v.name, Tenant: v.tenant, Host: v.host,
			Addrs: []netip.Addr{netip.MustParseAddr(v.addr)}, Interface: v.name + "-dev", In: v.in, Out: v.out})
	}
	return m
}

// pair is the data-path pair of two addresses.
func pair(src, dst string) datapath.Pair {
	return datapath.Pair{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst)}
}

// loopback opens agents' sockets on the loopback interface.
func loopback() (net.PacketConn, error) { return net.ListenPacket("udp4", "127.0.0.1:0") }

// newTestAgent makes an agent on a fake data path and closes it when the
// test ends (unless it ran).
func newTestAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// script is a test mechanism: its agents return what act says for each
// step (counted from 1) and record what they were given. It declares
// pair limits and schedulers; live says whether its agents take a new
// environment.
type script struct {
	live bool
	act  func(host string, step int, obs *mech.HostObs) mech.Actions

	mu     sync.Mutex
	agents map[string]*scriptAgent
}

func (s *script) Name() string { return "script" }

func (s *script) Capabilities() mech.Capabilities {
	return mech.Capabilities{PairLimits: true, Schedulers: true, LiveTenants: s.live}
}

func (s *script) NewAgent(env mech.Env) (mech.Agent, error) {
	a := &scriptAgent{s: s, env: env}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agents == nil {
		s.agents = map[string]*scriptAgent{}
	}
	s.agents[env.Host] = a
	if s.live {
		return liveAgent{a}, nil
	}
	return a, nil
}

// agent returns the agent of a host.
func (s *script) agent(host string) *scriptAgent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agents[host]
}

type scriptAgent struct {
	s     *script
	env   mech.Env
	steps int
	obs   []*mech.HostObs
	inbox [][]mech.Message
}

func (a *scriptAgent) Period() time.Duration { return 10 * time.Millisecond }

func (a *scriptAgent) Step(obs *mech.HostObs, inbox []mech.Message) mech.Actions {
	a.steps++
	a.obs = append(a.obs, obs)
	a.inbox = append(a.inbox, inbox)
	if a.s.act == nil {
		return mech.Actions{}
	}
	return a.s.act(a.env.Host, a.steps, obs)
}

// liveAgent is a scriptAgent that takes a new environment.
type liveAgent struct{ *scriptAgent }

func (a liveAgent) UpdateEnv(env mech.Env) error {
	a.env = env
	return nil
}

// fakePath returns a fake data path with pair limiters, schedulers and a
// loss counter seeing losses on side.
func fakePath(side mech.LossSide) *fake.Host {
	return fake.New(fake.Options{Limiters: true, Schedulers: true, Loss: true, LossSide: side})
}
