package place_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/place"
	"github.com/bulkhead-dc/bulkhead/topo"
)

// benchRequests draws tenants as in Oktopus's and QShare's large-scale
// evaluations: exponential sizes (mean 49 VMs, at least 1) and per-VM
// guarantees drawn from five values.
func benchRequests(seed uint64, n int) []place.Request {
	rng := rand.New(rand.NewPCG(seed, 7))
	rates := []float64{50e6, 100e6, 200e6, 300e6, 500e6}
	out := make([]place.Request, n)
	for i := range out {
		k := max(1, int(math.Round(rng.ExpFloat64()*49)))
		g := rates[rng.IntN(len(rates))]
		out[i] = place.Uniform(fmt.Sprintf("t%d", i), k, g, g)
	}
	return out
}

// fill places requests until the slots are at least frac reserved or 50
// requests in a row are rejected; it returns the requests placed and tried.
func fill(b *testing.B, p *place.Placer, reqs []place.Request, frac float64) (placed, tried int) {
	b.Helper()
	streak := 0
	for _, r := range reqs {
		if s, _ := p.Load(); s >= frac || streak >= 50 {
			break
		}
		tried++
		_, err := p.Place(r)
		var rj *place.Rejection
		switch {
		case errors.As(err, &rj):
			streak++
		case err != nil:
			b.Fatal(err)
		default:
			placed++
			streak = 0
		}
	}
	return placed, tried
}

// BenchmarkPlace times the placement of one tenant on a fat-tree with
// k = 16 (1024 servers, 10 Gbps links) half full: each iteration places the
// next request of a fixed stream and, if admitted, removes it again, so the
// state stays the same. ns/op is per tenant (placement + removal).
func BenchmarkPlace(b *testing.B) {
	for _, slots := range []int{16, 100} {
		for _, alg := range []place.Algorithm{place.Oktopus, place.QShare} {
			b.Run(fmt.Sprintf("%s/slots=%d", alg, slots), func(b *testing.B) {
				top, err := topo.FatTree(16, 10e9)
				if err != nil {
					b.Fatal(err)
				}
				p, err := place.NewPlacer(top, place.Options{Algorithm: alg, Slots: slots})
				if err != nil {
					b.Fatal(err)
				}
				fill(b, p, benchRequests(1, 100000), 0.5)
				probe := benchRequests(2, 1000)
				for i := range probe {
					probe[i].Name = fmt.Sprintf("probe%d", i)
					probe[i].VMs = place.Uniform(probe[i].Name, len(probe[i].VMs), probe[i].VMs[0].In, probe[i].VMs[0].Out).VMs
				}
				accepted, i := 0, 0
				for b.Loop() {
					r := probe[i%len(probe)]
					i++
					pl, err := p.Place(r)
					if err == nil {
						accepted++
						if err := p.Remove(pl.Tenant); err != nil {
							b.Fatal(err)
						}
					} else if !errors.As(err, new(*place.Rejection)) {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(accepted)/float64(i), "accepted/op")
			})
		}
	}
}

// BenchmarkFill embeds tenants into an empty k = 16 fat-tree until it is
// full (QShare §7.3.1: "until either network resources or computation
// resources are fully reserved"): µs/tenant is the mean time per request,
// rejections included.
func BenchmarkFill(b *testing.B) {
	for _, alg := range []place.Algorithm{place.Oktopus, place.QShare} {
		b.Run(string(alg), func(b *testing.B) {
			top, err := topo.FatTree(16, 10e9)
			if err != nil {
				b.Fatal(err)
			}
			reqs := benchRequests(1, 100000)
			var (
				placed, tried      int
				elapsed            time.Duration
				slotLoad, linkLoad float64
			)
			for b.Loop() {
				p, err := place.NewPlacer(top, place.Options{Algorithm: alg, Slots: 16})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				placed, tried = fill(b, p, reqs, 1)
				elapsed += time.Since(start)
				slotLoad, linkLoad = p.Load()
			}
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)/float64(tried), "µs/tenant")
			b.ReportMetric(float64(placed), "placed")
			b.ReportMetric(float64(tried), "tried")
			b.ReportMetric(100*slotLoad, "%slots")
			b.ReportMetric(100*linkLoad, "%links")
		})
	}
}
