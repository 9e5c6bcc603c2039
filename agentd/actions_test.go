package agentd_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/agentd"
	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/pki"
)

// pulsarCluster is a controller running Pulsar every 100 ms over hosts s1
// and s2, with tenant a's VMs a1 on s1 and a2 on s2.
func pulsarCluster(t *testing.T) *cluster {
	cl := newCluster(t)
	cl.apply(obj(api.KindCluster, api.ClusterName, &api.ClusterSpec{
		Topology:  mustTopology(t),
		Mechanism: api.Mechanism{Name: "pulsar", Params: map[string]any{"interval": "100ms"}},
	}))
	objs := []api.Object{}
	for _, h := range []string{"s1", "s2"} {
		objs = append(objs, obj(api.KindHost, h, &api.HostSpec{Address: mustAddr("127.0.0.1"), Port: cl.ports[h]}))
	}
	objs = append(objs, tenant("a", "a1", "s1", "10.0.0.1", "a2", "s2", "10.0.0.2"))
	cl.apply(objs...)
	return cl
}

// TestAgentKeepsCentralActions: under a mechanism with a central
// controller (Pulsar), the daemon receives the controller's actions every
// interval and keeps the latest for its host; default rates name only
// its own VMs.
func TestAgentKeepsCentralActions(t *testing.T) {
	cl := pulsarCluster(t)
	own := map[string]string{"s1": "a1", "s2": "a2"}
	for _, host := range []string{"s1", "s2"} {
		t.Run(host, func(t *testing.T) {
			tc, err := pki.ClientTLS(cl.pki, host)
			if err != nil {
				t.Fatal(err)
			}
			d, err := agentd.New(agentd.Config{
				Host: host, Controllers: []string{cl.addr}, TLS: tc, ReportEvery: 100 * time.Millisecond,
				Mechanism: all.New, Version: "test",
				Path: func(*model.Model, mech.Mechanism) (datapath.Host, error) {
					return fake.New(fake.Options{Limiters: true}), nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = d.Run(ctx) }()
			defer func() { cancel(); <-done }()
			waitFor(t, "three actions", func() bool { return d.ActionsReceived() >= 3 })
			a := d.Allocations()
			// Three steps' actions, the latest kept: its seq is at least 3.
			if a.Seq < 3 || a.Revision == 0 || a.Refused != 0 || !(a.DefaultRate > 0) {
				t.Errorf("actions kept: seq %d, revision %d, %d refused, default rate %v (Pulsar's default rate: > 0)", a.Seq, a.Revision, a.Refused, a.DefaultRate)
			}
			for vm := range a.DefaultBySrc {
				if vm != own[host] {
					t.Errorf("host %s got a default rate for VM %s of another host", host, vm)
				}
			}
			for f := range a.Flows {
				if f.Src != own[host] {
					t.Errorf("host %s got an allocation for flow %s->%s", host, f.Src, f.Dst)
				}
			}
		})
	}
}

// TestAgentEnforcesCentralAllocations: under Pulsar, a host whose VM
// sends reports the pair as a flow; the controller allocates it and the
// agent holds the pair at its allocation, in bits/s (the pair's limit
// the data path holds is the allocation's scarcest element × 8).
func TestAgentEnforcesCentralAllocations(t *testing.T) {
	cl := pulsarCluster(t)
	tc, err := pki.ClientTLS(cl.pki, "s1")
	if err != nil {
		t.Fatal(err)
	}
	path := fake.New(fake.Options{Limiters: true})
	d, err := agentd.New(agentd.Config{
		Host: "s1", Controllers: []string{cl.addr}, TLS: tc, ReportEvery: 100 * time.Millisecond,
		Mechanism: all.New, Version: "test",
		Path: func(*model.Model, mech.Mechanism) (datapath.Host, error) { return path, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// a1 sends to a2 at 50 Mbit/s, held back by its limiter.
	pair := datapath.Pair{Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.0.0.2")}
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		start := time.Now()
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tk.C:
				b := uint64(now.Sub(start).Seconds() * 50e6 / 8)
				path.Send(pair, datapath.Counters{Bytes: b, Packets: b / 1500, Overlimits: uint32(b / 1500)})
			}
		}
	}()
	defer func() { close(stop); <-sent }()
	id := mech.FlowID{Src: "a1", Dst: "a2"}
	waitFor(t, "an allocation for a1->a2", func() bool { _, ok := d.Allocations().Flows[id]; return ok })
	var want float64
	waitFor(t, "the pair held at its allocation", func() bool {
		want = drive.PairAllocLimit(d.Allocations().Flows[id])
		got, ok := path.Limit(pair)
		return ok && want > 0 && math.Abs(got-want) <= 1e-6*want
	})
	// The flow's demand (50 Mbit/s) is below its guarantee (100): Pulsar
	// allocates at least the demand.
	if want < 0.99*50e6 {
		t.Errorf("a1->a2 held at %.3g bit/s, below its 50 Mbit/s demand (guarantee 100 Mbit/s)", want)
	}
}
