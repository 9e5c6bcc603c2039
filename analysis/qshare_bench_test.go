package analysis_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/analysis"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/qshare"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// BenchmarkQShareBindingRound times one step of the QShare controller —
// usage per hypervisor, U-factors and scores, Alg. 2, queue weights, DSCP
// colouring, port configurations and messages — on a k = 16 fat-tree (1024
// servers × 100 VM slots, 10 Gbps links) filled with QShare's placement,
// with every VM sending to one other VM of its tenant at a random rate
// (fresh rates every round, so bindings change).
func BenchmarkQShareBindingRound(b *testing.B) {
	for _, ratio := range []int{1, 4} {
		b.Run(fmt.Sprintf("oversubscription=%d", ratio), func(b *testing.B) {
			top, err := topo.OversubscribedFatTree(16, ratio, 10e9)
			if err != nil {
				b.Fatal(err)
			}
			p, _, err := analysis.QShareFill(top, 100, 49, []float64{50e6, 100e6, 200e6, 300e6, 500e6}, 1)
			if err != nil {
				b.Fatal(err)
			}
			var env mech.ControllerEnv
			for _, l := range top.Links {
				q := 8
				if top.Nodes[l.From].Kind == topo.Server {
					q = 64 // software WFQ on the hypervisor
				}
				env.Resources = append(env.Resources, mech.ResourceInfo{ID: l.Name, Kind: mech.LinkResource, Capacity: l.Capacity / 8, Queues: q, MaxWeight: 100})
			}
			var vms [][]mech.VM
			for _, pl := range p.Tenants() {
				env.VDCs = append(env.VDCs, mech.VDC{Tenant: pl.Tenant})
				var tv []mech.VM
				for _, v := range pl.VMs {
					vm := mech.VM{Name: v.Name, Tenant: pl.Tenant, Host: v.Server, In: v.In, Out: v.Out}
					env.VMs = append(env.VMs, vm)
					tv = append(tv, vm)
				}
				vms = append(vms, tv)
				for _, lr := range pl.Links {
					env.Reservations = append(env.Reservations, mech.Reservation{Tenant: pl.Tenant, Resource: lr.Link, Rate: lr.Rate})
				}
			}
			c, err := qshare.NewController(qshare.DefaultParams(), env)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewSource(1))
			obs := make([]*mech.ControllerObs, 4)
			for i := range obs {
				o := &mech.ControllerObs{Period: time.Second}
				for _, tv := range vms {
					if len(tv) < 2 {
						continue
					}
					for k, v := range tv {
						dst := tv[(k+1+rng.Intn(len(tv)-1))%len(tv)]
						o.Flows = append(o.Flows, mech.FlowObs{Flow: mech.FlowID{Src: v.Name, Dst: dst.Name}, Tenant: v.Tenant,
							Path: []mech.PathElem{{}}, Used: []float64{rng.Float64() * 2 * v.Out / 8}})
					}
				}
				obs[i] = o
			}
			i := 0
			for b.Loop() {
				c.Step(obs[i%len(obs)])
				i++
			}
			b.ReportMetric(float64(len(env.VDCs)), "tenants")
			b.ReportMetric(float64(len(obs[0].Flows)), "flows")
		})
	}
}
