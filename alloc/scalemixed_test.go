package alloc

import (
	"reflect"
	"testing"
)

func TestPulsarScaleMixed(t *testing.T) {
	for _, tc := range []struct {
		k    int
		seed int64
	}{{1, 1}, {2, 1}, {1, 7}} {
		p, vp, err := PulsarScaleMixed(tc.seed, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		nSrv := 2000 * tc.k
		if len(p.Flows) != 12*nSrv || len(vp.Flows) != 12*nSrv || len(p.Resources) != 4200*tc.k || len(vp.Resources) != 4200*tc.k {
			t.Fatalf("k=%d: %d flows, %d resources; vector %d, %d", tc.k, len(p.Flows), len(p.Resources), len(vp.Flows), len(vp.Resources))
		}
		if err := Validate(p); err != nil {
			t.Fatal(err)
		}
		if err := vp.Validate(); err != nil {
			t.Fatal(err)
		}
		toApp := 0
		for i, f := range p.Flows {
			if i > 0 && f.ID <= p.Flows[i-1].ID {
				t.Fatalf("flow IDs out of order: %s after %s", f.ID, p.Flows[i-1].ID)
			}
			if f.Uses[1].Resource >= 2*nSrv {
				toApp++
				if len(f.Uses) != 3 || f.Uses[2].Resource != f.Uses[0].Resource+1 {
					t.Fatalf("flow %s: appliance path %v", f.ID, f.Uses)
				}
			}
		}
		if want := int(0.44*float64(12*nSrv) + 0.5); toApp != want {
			t.Errorf("k=%d: %d flows to appliances, want %d", tc.k, toApp, want)
		}
		// Dominant resources differ: appliances, uplinks and downlinks
		// each dominate a good share of the flows.
		var app, up, down int
		for r, n := range DominantResources(vp) {
			switch {
			case r >= 2*nSrv:
				app += n
			case r%2 == 0:
				up += n
			default:
				down += n
			}
		}
		nf := len(vp.Flows)
		t.Logf("k=%d seed=%d: dominant resource appliance %d, uplink %d, downlink %d", tc.k, tc.seed, app, up, down)
		for name, n := range map[string]int{"appliance": app, "uplink": up, "downlink": down} {
			if n < nf/20 {
				t.Errorf("k=%d: %d flows dominated by a %s, want at least 5%%", tc.k, n, name)
			}
		}

		rates, err := MaxMin(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkMaxMinFast(p, rates); err != nil {
			t.Error(err)
		}
		x, err := DRF(vp)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDRFFast(vp, x); err != nil {
			t.Error(err)
		}
		n := Differing(rates, VectorRates(p, vp, x))
		t.Logf("k=%d: DRF differs from weighted max-min on %d of %d flows", tc.k, n, nf)
		if n < nf/10 {
			t.Errorf("k=%d: DRF differs from weighted max-min on only %d of %d flows", tc.k, n, nf)
		}
	}
}

// On PulsarScale the uplink dominates every flow, and DRF is weighted
// max-min (what PulsarScaleMixed is for).
func TestPulsarScaleDRFIsMaxMin(t *testing.T) {
	p, vp := PulsarScale(1)
	for r, n := range DominantResources(vp) {
		if n > 0 && (r >= 4000 || r%2 != 0) {
			t.Fatalf("%d flows dominated by %s", n, vp.Resources[r].ID)
		}
	}
	rates, err := MaxMin(p)
	if err != nil {
		t.Fatal(err)
	}
	x, err := DRF(vp)
	if err != nil {
		t.Fatal(err)
	}
	if n := Differing(rates, VectorRates(p, vp, x)); n != 0 {
		t.Errorf("DRF differs from weighted max-min on %d flows of PulsarScale", n)
	}
}

func TestPulsarScaleMixedDeterministic(t *testing.T) {
	p1, v1, err := PulsarScaleMixed(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	p2, v2, err := PulsarScaleMixed(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p1, p2) || !reflect.DeepEqual(v1, v2) {
		t.Error("same seed, different instances")
	}
	p3, _, err := PulsarScaleMixed(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(p1.Flows, p3.Flows) {
		t.Error("another seed, the same flows")
	}
	for _, k := range []int{0, -1, MaxMixedScale + 1} {
		if _, _, err := PulsarScaleMixed(1, k); err == nil {
			t.Errorf("k=%d accepted", k)
		}
	}
}
