package eval_test

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/eval"
	"github.com/bulkhead-dc/bulkhead/eval/evaltest"
)

// part is a pair sample: rate, demand (Mbps), active, active from.
type part = [4]float64

var idle = part{}

// Pairs that offer traffic for part of a sample are guaranteed, and
// counted, only for that part. ManyToOne(2): X1→X0, Y1→Y0, Y2→Y0, hoses
// of 450 Mbps, every pair through the 1 Gbps link into the receivers.
func TestPartialCompliance(t *testing.T) {
	tests := []struct {
		name    string
		samples [][]part // samples × pairs
		x, y    float64  // compliance of X and Y
		vms     float64  // VM-seconds counted (interval 0.1 s)
		gX, gY  float64  // mean guarantees, Mbps
	}{
		{
			name:    "TCP on for half the sample at its guarantee is served",
			samples: [][]part{{{225, inf, 0.5, 0.5}, idle, idle}},
			x:       1, y: 1, vms: 0.1, gX: 225,
		},
		{
			name:    "the same, activity not recorded: the whole sample at its guarantee",
			samples: [][]part{{{225, inf, 0, 0}, idle, idle}},
			x:       0, y: 1, vms: 0.2, gX: 450,
		},
		{
			name:    "TCP on for half the sample at half its guarantee is not",
			samples: [][]part{{{112.5, inf, 0.5, 0}, idle, idle}},
			x:       0, y: 1, vms: 0.1, gX: 225,
		},
		{
			// 800 Mbps while on for 40% of the sample: a mean demand of 320.
			name:    "UDP above its guarantee on for 40%, held at its guarantee: served",
			samples: [][]part{{{180, 320, 0.4, 0.3}, idle, idle}},
			x:       1, y: 1, vms: 0.08, gX: 180,
		},
		{
			name:    "the same, activity not recorded: guaranteed its mean demand",
			samples: [][]part{{{180, 320, 0, 0}, idle, idle}},
			x:       0, y: 1, vms: 0.2, gX: 320,
		},
		{
			name:    "UDP below its guarantee on for half, all delivered",
			samples: [][]part{{{100, 100, 0.5, 0.25}, idle, idle}},
			x:       1, y: 1, vms: 0.1, gX: 100,
		},
		{
			// Y0 receives from Y1, then from Y2: 450 all the time.
			name:    "a VM's pairs one after the other, each at the hose",
			samples: [][]part{{idle, {225, inf, 0.5, 0}, {225, inf, 0.5, 0.5}}},
			x:       1, y: 1, vms: 0.2, gY: 450,
		},
		{
			name:    "one after the other at half the hose is not served",
			samples: [][]part{{idle, {112.5, inf, 0.5, 0}, {112.5, inf, 0.5, 0.5}}},
			x:       1, y: 0, vms: 0.2, gY: 450,
		},
		{
			// Y1 alone for half (450), then sharing Y0 with Y2 (225 each).
			name:    "overlapping pairs of a VM",
			samples: [][]part{{idle, {337.5, inf, 1, 0}, {112.5, inf, 0.5, 0.5}}},
			x:       1, y: 1, vms: 0.25, gY: 450,
		},
		{
			name:    "overlapping pairs of a VM: the later one short",
			samples: [][]part{{idle, {337.5, inf, 1, 0}, {100, inf, 0.5, 0.5}}},
			x:       1, y: 2 / 2.5, vms: 0.25, gY: 450,
		},
		{
			// A miss in a sample where X was on for 10% weighs 0.1 sample.
			name: "a short miss weighs its share of the sample",
			samples: [][]part{
				{{0, inf, 0.1, 0.9}, idle, idle},
				{{450, inf, 0, 0}, idle, idle}, {{450, inf, 0, 0}, idle, idle}, {{450, inf, 0, 0}, idle, idle},
				{{450, inf, 0, 0}, idle, idle}, {{450, inf, 0, 0}, idle, idle}, {{450, inf, 0, 0}, idle, idle},
				{{450, inf, 0, 0}, idle, idle}, {{450, inf, 0, 0}, idle, idle}, {{450, inf, 0, 0}, idle, idle},
			},
			x: 9 / 9.1, y: 1, vms: 2 * 0.91, gX: (45 + 9*450) / 10.0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := evaltest.ManyToOne(2)
			for _, s := range tc.samples {
				evaltest.AddParts(&in, s...)
			}
			r, err := eval.Evaluate(in)
			if err != nil {
				t.Fatal(err)
			}
			x, y := r.Tenants[0], r.Tenants[1]
			if !near(x.Compliance, tc.x, 1e-9) || !near(y.Compliance, tc.y, 1e-9) {
				t.Errorf("compliance X %v Y %v, want %v %v", x.Compliance, y.Compliance, tc.x, tc.y)
			}
			if !near(r.VMSeconds, tc.vms, 1e-9) {
				t.Errorf("VM-seconds %v, want %v", r.VMSeconds, tc.vms)
			}
			if !near(x.Guarantee, tc.gX, 1e-9) || !near(y.Guarantee, tc.gY, 1e-9) {
				t.Errorf("guarantees X %v Y %v, want %v %v", x.Guarantee, y.Guarantee, tc.gX, tc.gY)
			}
		})
	}
}

// The ideal, and with it work conservation, counts a pair only while it
// is active, and what the others could have had meanwhile.
func TestPartialIdeal(t *testing.T) {
	tests := []struct {
		name           string
		sample         []part
		idealX, idealY float64
		wcX, wc        float64
		scope          string
	}{
		{
			name:   "taking turns on the bottleneck",
			sample: []part{{500, inf, 0.5, 0}, {500, inf, 0.5, 0.5}, idle},
			idealX: 500, idealY: 500, wcX: 1, wc: 1, scope: eval.ScopeBottlenecks,
		},
		{
			// X alone for half the sample (1000), then sharing (500).
			name:   "Y joins halfway: X could have had the link before",
			sample: []part{{500, inf, 1, 0}, {250, inf, 0.5, 0.5}, idle},
			idealX: 750, idealY: 250, wcX: 500.0 / 750, wc: 0.75, scope: eval.ScopeBottlenecks,
		},
		{
			name:   "the same, activity not recorded",
			sample: []part{{500, inf, 0, 0}, {250, inf, 0, 0}, idle},
			idealX: 500, idealY: 500, wcX: 1, wc: 0.75, scope: eval.ScopeBottlenecks,
		},
		{
			// The link is saturated only while Y1 is on; X crosses it then.
			name:   "on a bottleneck while another pair is active",
			sample: []part{{100, 100, 0, 0}, {400, inf, 0.5, 0.5}, idle},
			idealX: 100, idealY: 450, wcX: 1, wc: 500.0 / 550, scope: eval.ScopeBottlenecks,
		},
		{
			name:   "bounded demands that never fill the link",
			sample: []part{{50, 50, 0.5, 0}, {100, 100, 0.25, 0.75}, idle},
			idealX: 50, idealY: 100, wcX: 1, wc: 1, scope: eval.ScopeAll,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := evaltest.ManyToOne(2)
			evaltest.AddParts(&in, tc.sample...)
			r, err := eval.Evaluate(in)
			if err != nil {
				t.Fatal(err)
			}
			x, y := r.Tenants[0], r.Tenants[1]
			if !near(x.IdealThroughput, tc.idealX, 1e-6) || !near(y.IdealThroughput, tc.idealY, 1e-6) {
				t.Errorf("ideal X %v Y %v, want %v %v", x.IdealThroughput, y.IdealThroughput, tc.idealX, tc.idealY)
			}
			if !near(x.WorkConservation, tc.wcX, 1e-6) || !near(r.WorkConservation, tc.wc, 1e-6) || r.WorkConservationScope != tc.scope {
				t.Errorf("work conservation X %v, run %v (%s), want %v %v (%s)", x.WorkConservation, r.WorkConservation, r.WorkConservationScope, tc.wcX, tc.wc, tc.scope)
			}
		})
	}
}

// A pair recorded as active over the whole interval reads exactly as one
// whose activity is not recorded: drivers that do not record it keep their
// results.
func TestWholeIntervalIsUnrecorded(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 0))
	for trial := 0; trial < 20; trial++ {
		unrec := evaltest.ManyToOne(4)
		whole := evaltest.ManyToOne(4)
		for k := 0; k < 30; k++ {
			var a, b []part
			for i := 0; i < len(unrec.Pairs); i++ {
				p := part{rng.Float64() * 500}
				switch rng.IntN(3) {
				case 0: // idle
					p[0] = 0
				case 1:
					p[1] = inf
				case 2:
					p[1] = rng.Float64() * 600
				}
				a = append(a, p)
				if p[1] > 0 {
					p[2] = 1
				}
				b = append(b, p)
			}
			evaltest.AddParts(&unrec, a...)
			evaltest.AddParts(&whole, b...)
		}
		ru, err := eval.Evaluate(unrec)
		if err != nil {
			t.Fatal(err)
		}
		rw, err := eval.Evaluate(whole)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ru, rw) {
			t.Fatalf("trial %d: reports differ:\nnot recorded %+v\nwhole %+v", trial, ru, rw)
		}
	}
}

// Splitting a sample's pairs into two groups active one after the other
// gives each group the guarantees it would have alone, halved.
func TestPartialSegmentsMatchAlone(t *testing.T) {
	in := evaltest.ManyToOne(4)
	// X1 and Y1..Y2 on in the first 0.3; Y3..Y4 in the rest.
	evaltest.AddParts(&in, part{0, inf, 0.3, 0}, part{0, inf, 0.3, 0}, part{0, 200, 0.3, 0}, part{0, inf, 0.7, 0.3}, part{0, 100, 0.7, 0.3})
	first := evaltest.ManyToOne(4)
	evaltest.AddParts(&first, part{0, inf, 0, 0}, part{0, inf, 0, 0}, part{0, 200 / 0.3, 0, 0}, idle, idle)
	second := evaltest.ManyToOne(4)
	evaltest.AddParts(&second, idle, idle, idle, part{0, inf, 0, 0}, part{0, 100 / 0.7, 0, 0})
	r, err := eval.Evaluate(in)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := eval.Evaluate(first)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := eval.Evaluate(second)
	if err != nil {
		t.Fatal(err)
	}
	for ti := range r.Tenants {
		g := 0.3*r1.Tenants[ti].Guarantee + 0.7*r2.Tenants[ti].Guarantee
		id := 0.3*r1.Tenants[ti].IdealThroughput + 0.7*r2.Tenants[ti].IdealThroughput
		if !near(r.Tenants[ti].Guarantee, g, 1e-9) || !near(r.Tenants[ti].IdealThroughput, id, 1e-9) {
			t.Errorf("tenant %s: guarantee %v ideal %v, want %v %v", r.Tenants[ti].Name, r.Tenants[ti].Guarantee, r.Tenants[ti].IdealThroughput, g, id)
		}
	}
}

func TestValidateActive(t *testing.T) {
	tests := []struct {
		name string
		p    eval.PairSample
		want string
	}{
		{"above 1", eval.PairSample{Demand: 1, Active: 1.5}, "must be within [0, 1]"},
		{"negative", eval.PairSample{Demand: 1, Active: -0.1}, "must be within [0, 1]"},
		{"past the end", eval.PairSample{Demand: 1, Active: 0.5, ActiveFrom: 0.6}, "must be within [0, 1]"},
		{"NaN", eval.PairSample{Demand: 1, Active: math.NaN()}, "must be within [0, 1]"},
		{"from without active", eval.PairSample{Demand: 1, ActiveFrom: 0.2}, "for no time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := evaltest.ManyToOne(1)
			evaltest.AddSample(&in, [2]float64{0, 0}, [2]float64{0, 0})
			in.Samples[0].Pairs[0] = tc.p
			_, err := eval.Evaluate(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	in := evaltest.ManyToOne(1)
	evaltest.AddParts(&in, part{1, 1, 0.5, 0.5}, part{1, 1, 1, 0})
	if _, err := eval.Evaluate(in); err != nil {
		t.Errorf("valid activity refused: %v", err)
	}
}

func TestActiveIn(t *testing.T) {
	ms := time.Millisecond
	iv := func(a, b int) eval.Interval {
		return eval.Interval{Start: time.Duration(a) * ms, Stop: time.Duration(b) * ms}
	}
	tests := []struct {
		name         string
		on           []eval.Interval
		active, from float64
	}{
		{"none", nil, 0, 0},
		{"before the window", []eval.Interval{iv(0, 100)}, 0, 0},
		{"after the window", []eval.Interval{iv(200, 300)}, 0, 0},
		{"covers it", []eval.Interval{iv(0, 1000)}, 1, 0},
		{"starts inside", []eval.Interval{iv(150, 1000)}, 0.5, 0.5},
		{"stops inside", []eval.Interval{iv(0, 130)}, 0.3, 0},
		{"inside", []eval.Interval{iv(120, 160)}, 0.4, 0.2},
		{"overlapping, out of order", []eval.Interval{iv(150, 170), iv(120, 160)}, 0.5, 0.2},
		{"apart", []eval.Interval{iv(180, 190), iv(110, 120)}, 0.2, 0.1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, f := eval.ActiveIn(100*ms, 200*ms, tc.on)
			if !near(a, tc.active, 1e-12) || !near(f, tc.from, 1e-12) {
				t.Errorf("ActiveIn = %v from %v, want %v from %v", a, f, tc.active, tc.from)
			}
		})
	}
}
