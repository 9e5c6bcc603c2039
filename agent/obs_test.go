package agent

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
)

// newObsFixture is the agent of h1 on a fake data path: a (tenant A) and
// c (tenant C) on h1; b (A) and d (C) on h2.
func newObsFixture(t *testing.T, side mech.LossSide, scale float64) *obsFixture {
	return obsFixtureOn(t, fakePath(side), scale)
}

func obsFixtureOn(t *testing.T, p *fake.Host, scale float64) *obsFixture {
	m := testModel(vmSpec{"a", "A", "h1", "10.0.0.1", 1e8, 1e8}, vmSpec{"b", "A", "h2", "10.0.0.2", 1e8, 1e8},
		vmSpec{"c", "C", "h1", "10.0.0.3", 1e8, 1e8}, vmSpec{"d", "C", "h2", "10.0.0.4", 1e8, 1e8})
	a := newTestAgent(t, Config{Host: "h1", Model: m, Mechanism: &script{}, Path: p, Scale: scale})
	return &obsFixture{a: a, p: p, t0: time.Unix(1000, 0)}
}

type obsFixture struct {
	a  *Agent
	p  *fake.Host
	t0 time.Time
}

var (
	ab = pair("10.0.0.1", "10.0.0.2")
	ba = pair("10.0.0.2", "10.0.0.1")
	da = pair("10.0.0.4", "10.0.0.1")
)

func findPair(os []mech.PairObs, src, dst string) (mech.PairObs, bool) {
	for _, o := range os {
		if o.Pair.Src == src && o.Pair.Dst == dst {
			return o, true
		}
	}
	return mech.PairObs{}, false
}

func findVM(os []mech.VMObs, vm string) mech.VMObs {
	for _, o := range os {
		if o.VM == vm {
			return o
		}
	}
	return mech.VMObs{}
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }

// TestObserve: the observation of a period from the data path's
// counters, 100 ms apart: rates from counter deltas (÷ Scale), whether a
// pair's limiter held it back, losses on the side the counter sees them,
// VM rates, ingress drops and the source that lost most.
func TestObserve(t *testing.T) {
	const dt = 100 * time.Millisecond
	limit := func(f *obsFixture, rate float64) {
		if err := f.a.enf.SetLimit(mech.Limit{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a", Dst: "b"}, Rate: rate}); err != nil {
			t.Fatal(err)
		}
	}
	installIngress := func(f *obsFixture) {
		if err := f.a.cfg.Path.Scheduler(mech.Ingress).Set(1e9, map[string]float64{"a": 1, "c": 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		side   mech.LossSide
		scale  float64
		before func(f *obsFixture) // before the first reading
		after  func(f *obsFixture) // between the readings
		check  func(t *testing.T, o *mech.HostObs)
	}{
		{
			name: "rates from counter deltas", scale: 2,
			before: func(f *obsFixture) {
				f.p.Send(ab, datapath.Counters{Bytes: 1000})
				f.p.Receive(ba, 2000)
				f.p.Device("a-dev", datapath.DevCounters{Rx: 500, Tx: 700})
			},
			after: func(f *obsFixture) {
				f.p.Send(ab, datapath.Counters{Bytes: 1000 + 1.25e6})
				f.p.Receive(ba, 2000+625e3)
				f.p.Device("a-dev", datapath.DevCounters{Rx: 500 + 1.25e6, Tx: 700 + 2.5e6})
			},
			check: func(t *testing.T, o *mech.HostObs) {
				// 1.25 MB in 100 ms is 100 Mbit/s on the wire, 50 at scale 2
				eg, ok := findPair(o.Egress, "a", "b")
				if !ok || !near(eg.Rate, 50e6) || eg.Tenant != "A" || !math.IsInf(eg.Limit, 1) || eg.LimiterBound {
					t.Errorf("egress a->b %+v (listed %v)", eg, ok)
				}
				if in, ok := findPair(o.Ingress, "b", "a"); !ok || !near(in.Rate, 25e6) {
					t.Errorf("ingress b->a %+v (listed %v)", in, ok)
				}
				if v := findVM(o.VMs, "a"); !near(v.OutRate, 50e6) || !near(v.InRate, 100e6) || v.InArrival != v.InRate {
					t.Errorf("VM a %+v", v)
				}
				if o.Period != dt || o.Now != dt {
					t.Errorf("period %v, now %v", o.Period, o.Now)
				}
			},
		},
		{
			name: "a counter that restarted counts from zero", scale: 1,
			before: func(f *obsFixture) { f.p.Send(ab, datapath.Counters{Bytes: 5e6}) },
			after:  func(f *obsFixture) { f.p.Send(ab, datapath.Counters{Bytes: 125e3}) },
			check: func(t *testing.T, o *mech.HostObs) {
				if eg, _ := findPair(o.Egress, "a", "b"); !near(eg.Rate, 10e6) {
					t.Errorf("egress a->b %+v, want 10 Mbit/s", eg)
				}
			},
		},
		{
			name: "limited with a backlog: limiter-bound", scale: 1,
			before: func(f *obsFixture) { limit(f, 40e6); f.p.Send(ab, datapath.Counters{Bytes: 0}) },
			after:  func(f *obsFixture) { f.p.Send(ab, datapath.Counters{Bytes: 500e3, Backlog: 3000}) },
			check: func(t *testing.T, o *mech.HostObs) {
				if eg, _ := findPair(o.Egress, "a", "b"); !eg.LimiterBound || eg.Limit != 40e6 || !near(eg.Rate, 40e6) {
					t.Errorf("egress a->b %+v", eg)
				}
			},
		},
		{
			name: "limited and over its rate: limiter-bound", scale: 1,
			before: func(f *obsFixture) { limit(f, 40e6); f.p.Send(ab, datapath.Counters{Overlimits: 7}) },
			after:  func(f *obsFixture) { f.p.Send(ab, datapath.Counters{Bytes: 1000, Overlimits: 8}) },
			check: func(t *testing.T, o *mech.HostObs) {
				if eg, _ := findPair(o.Egress, "a", "b"); !eg.LimiterBound {
					t.Errorf("egress a->b %+v", eg)
				}
			},
		},
		{
			name: "limited and dropping: limiter-bound", scale: 1,
			before: func(f *obsFixture) { limit(f, 40e6); f.p.Send(ab, datapath.Counters{Drops: 2}) },
			after:  func(f *obsFixture) { f.p.Send(ab, datapath.Counters{Bytes: 1000, Drops: 3}) },
			check: func(t *testing.T, o *mech.HostObs) {
				if eg, _ := findPair(o.Egress, "a", "b"); !eg.LimiterBound {
					t.Errorf("egress a->b %+v", eg)
				}
			},
		},
		{
			name: "limited below its rate, or unlimited with a backlog: not bound", scale: 1,
			before: func(f *obsFixture) {
				limit(f, 40e6)
				f.p.Send(ab, datapath.Counters{Overlimits: 7, Drops: 2})
				f.p.Send(pair("10.0.0.3", "10.0.0.4"), datapath.Counters{})
			},
			after: func(f *obsFixture) {
				f.p.Send(ab, datapath.Counters{Bytes: 1000, Overlimits: 7, Drops: 2})
				f.p.Send(pair("10.0.0.3", "10.0.0.4"), datapath.Counters{Bytes: 1000, Backlog: 9000, Overlimits: 3})
			},
			check: func(t *testing.T, o *mech.HostObs) {
				if eg, _ := findPair(o.Egress, "a", "b"); eg.LimiterBound {
					t.Errorf("egress a->b %+v", eg)
				}
				if eg, _ := findPair(o.Egress, "c", "d"); eg.LimiterBound || eg.Tenant != "C" {
					t.Errorf("egress c->d %+v", eg)
				}
			},
		},
		{
			name: "idle pairs are left out unless limited", scale: 1,
			before: func(f *obsFixture) {
				limit(f, 40e6)
				f.p.Send(ab, datapath.Counters{Bytes: 10})
				f.p.Send(pair("10.0.0.3", "10.0.0.4"), datapath.Counters{Bytes: 10})
				f.p.Receive(ba, 10)
			},
			after: func(f *obsFixture) {},
			check: func(t *testing.T, o *mech.HostObs) {
				if eg, ok := findPair(o.Egress, "a", "b"); !ok || eg.Rate != 0 {
					t.Errorf("limited idle a->b: %+v (listed %v)", eg, ok)
				}
				if _, ok := findPair(o.Egress, "c", "d"); ok {
					t.Error("idle unlimited c->d listed")
				}
				if len(o.Ingress) != 0 {
					t.Errorf("idle ingress pairs listed: %+v", o.Ingress)
				}
			},
		},
		{
			name: "losses at the source", side: mech.LossAtSource, scale: 1,
			before: func(f *obsFixture) { f.p.Send(ab, datapath.Counters{}); f.p.Lose(ab, 3); f.p.Lose(ba, 4) },
			after:  func(f *obsFixture) { f.p.Lose(ab, 5); f.p.Lose(ba, 6); f.p.Receive(ba, 1000) },
			check: func(t *testing.T, o *mech.HostObs) {
				if eg, ok := findPair(o.Egress, "a", "b"); !ok || eg.Losses != 5 {
					t.Errorf("egress a->b %+v (listed %v), want 5 losses", eg, ok)
				}
				if in, _ := findPair(o.Ingress, "b", "a"); in.Losses != 0 {
					t.Errorf("ingress b->a %+v: losses at the source reported at the destination", in)
				}
			},
		},
		{
			name: "losses at the destination", side: mech.LossAtDestination, scale: 1,
			before: func(f *obsFixture) {
				f.p.Send(ab, datapath.Counters{})
				f.p.Receive(ba, 0)
				f.p.Lose(ba, 4)
				f.p.Lose(ab, 1)
			},
			after: func(f *obsFixture) { f.p.Lose(ba, 6); f.p.Lose(ab, 2); f.p.Send(ab, datapath.Counters{Bytes: 1000}) },
			check: func(t *testing.T, o *mech.HostObs) {
				if in, ok := findPair(o.Ingress, "b", "a"); !ok || in.Losses != 6 || in.Rate != 0 {
					t.Errorf("ingress b->a %+v (listed %v), want 6 losses", in, ok)
				}
				if eg, _ := findPair(o.Egress, "a", "b"); eg.Losses != 0 {
					t.Errorf("egress a->b %+v: losses at the destination reported at the source", eg)
				}
			},
		},
		{
			name: "ingress drops from the arrivals; the largest sender lost most", scale: 1,
			before: func(f *obsFixture) {
				installIngress(f)
				f.p.Receive(ba, 0)
				f.p.Receive(da, 0)
				f.p.Sched(mech.Ingress).Count("a", datapath.Counters{Bytes: 1000, Backlog: 1000})
				f.p.Sched(mech.Ingress).Arrive("a", 2000)
				f.p.Device("a-dev", datapath.DevCounters{})
			},
			after: func(f *obsFixture) {
				f.p.Receive(ba, 1e6)
				f.p.Receive(da, 500e3)
				// arrived 2 MB; sent 1.5 MB, the queue grew by 2000 bytes: 498 KB dropped
				f.p.Sched(mech.Ingress).Count("a", datapath.Counters{Bytes: 1000 + 1.5e6, Backlog: 3000, Drops: 40})
				f.p.Sched(mech.Ingress).Arrive("a", 2000+2e6)
				f.p.Device("a-dev", datapath.DevCounters{Tx: 1.5e6})
			},
			check: func(t *testing.T, o *mech.HostObs) {
				v := findVM(o.VMs, "a")
				if !near(v.InDrops, 498e3*8/0.1) || v.DropSrc != "b" || !near(v.InRate, 120e6) || !near(v.InArrival, v.InRate+v.InDrops) {
					t.Errorf("VM a %+v", v)
				}
				if c := findVM(o.VMs, "c"); c.InDrops != 0 || c.DropSrc != "" {
					t.Errorf("VM c %+v", c)
				}
			},
		},
		{
			name: "ingress drops without arrival counters: drops × mean packet size", scale: 1,
			before: func(f *obsFixture) {
				installIngress(f)
				f.p.Sched(mech.Ingress).Count("a", datapath.Counters{})
			},
			after: func(f *obsFixture) {
				f.p.Sched(mech.Ingress).Count("a", datapath.Counters{Bytes: 150e3, Packets: 100, Drops: 10})
			},
			check: func(t *testing.T, o *mech.HostObs) {
				// 10 drops of 1500 bytes in 100 ms
				if v := findVM(o.VMs, "a"); !near(v.InDrops, 1.2e6) || v.DropSrc != "" {
					t.Errorf("VM a %+v", v)
				}
			},
		},
		{
			name: "arrivals short of what was sent: no drop (timing), carried", scale: 1,
			before: func(f *obsFixture) {
				installIngress(f)
				f.p.Sched(mech.Ingress).Count("a", datapath.Counters{Bytes: 1})
				f.p.Sched(mech.Ingress).Arrive("a", 1)
			},
			after: func(f *obsFixture) {
				f.p.Sched(mech.Ingress).Count("a", datapath.Counters{Bytes: 1 + 2e3, Drops: 1})
				f.p.Sched(mech.Ingress).Arrive("a", 1+1e3)
			},
			check: func(t *testing.T, o *mech.HostObs) {
				if v := findVM(o.VMs, "a"); v.InDrops != 0 {
					t.Errorf("VM a %+v", v)
				}
			},
		},
		{
			name: "an egress scheduler's class is what the VM sent", scale: 1,
			before: func(f *obsFixture) {
				if err := f.a.cfg.Path.Scheduler(mech.Egress).Set(1e9, map[string]float64{"a": 1}); err != nil {
					t.Fatal(err)
				}
				f.p.Sched(mech.Egress).Count("a", datapath.Counters{Bytes: 100})
				f.p.Device("a-dev", datapath.DevCounters{})
			},
			after: func(f *obsFixture) {
				f.p.Sched(mech.Egress).Count("a", datapath.Counters{Bytes: 100 + 250e3})
				f.p.Device("a-dev", datapath.DevCounters{Rx: 1e6})
			},
			check: func(t *testing.T, o *mech.HostObs) {
				if v := findVM(o.VMs, "a"); !near(v.OutRate, 20e6) {
					t.Errorf("VM a %+v, want OutRate 20 Mbit/s from its class", v)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newObsFixture(t, tc.side, tc.scale)
			f.a.start = f.t0
			tc.before(f)
			first, err := f.a.observe(f.t0)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range append(first.Egress, first.Ingress...) {
				if o.Rate != 0 || o.Losses != 0 {
					t.Errorf("first observation has %+v", o)
				}
			}
			tc.after(f)
			o, err := f.a.observe(f.t0.Add(dt))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// TestObserveAfterFailedRead: a read of counters that fails fails the
// observation, and the next one starts afresh (rates 0, as the first)
// rather than divide two periods of bytes by one; the one after measures
// again. (A loss counter that fails is logged: the step goes on without
// losses.)
func TestObserveAfterFailedRead(t *testing.T) {
	f := obsFixtureOn(t, fake.New(fake.Options{Limiters: true, Schedulers: true}), 1)
	f.a.start = f.t0
	at := func(i int) time.Time { return f.t0.Add(time.Duration(i) * 100 * time.Millisecond) }
	bytes := uint64(0)
	send := func() { bytes += 125e3; f.p.Send(ab, datapath.Counters{Bytes: bytes}) }
	send()
	if _, err := f.a.observe(at(0)); err != nil {
		t.Fatal(err)
	}
	send()
	f.p.FailReads(1)
	if _, err := f.a.observe(at(1)); !errors.Is(err, fake.ErrRead) {
		t.Fatalf("observe with a failed read: %v", err)
	}
	send()
	o, err := f.a.observe(at(2))
	if err != nil {
		t.Fatal(err)
	}
	if eg, _ := findPair(o.Egress, "a", "b"); eg.Rate != 0 || o.Period != 0 {
		t.Errorf("after a failed read: a->b %+v, period %v; want a fresh start", eg, o.Period)
	}
	send()
	o, err = f.a.observe(at(3))
	if err != nil {
		t.Fatal(err)
	}
	if eg, _ := findPair(o.Egress, "a", "b"); !near(eg.Rate, 10e6) || o.Period != 100*time.Millisecond {
		t.Errorf("then: a->b %+v, period %v; want 10 Mbit/s over 100 ms", eg, o.Period)
	}
}

func TestHTTPAddr(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{":9100", "127.0.0.1:9100", false},
		{"0.0.0.0:9100", "0.0.0.0:9100", false},
		{"10.0.0.5:9100", "10.0.0.5:9100", false},
		{"[::1]:9100", "[::1]:9100", false},
		{"9100", "", true},
	}
	for _, tt := range tests {
		got, err := httpAddr(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("httpAddr(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

func TestHTTPExposure(t *testing.T) {
	tests := []struct {
		addr, token string
		bad         bool
	}{
		{"127.0.0.1:9100", "", false},
		{"[::1]:9100", "", false},
		{"localhost:9100", "", false},
		{"0.0.0.0:9100", "", true},
		{"10.0.0.5:9100", "", true},
		{"[::]:9100", "", true},
		{"0.0.0.0:9100", "s3cret", false},
		{"10.0.0.5:9100", "s3cret", false},
	}
	for _, tt := range tests {
		err := checkExposure(tt.addr, tt.token)
		if (err != nil) != tt.bad {
			t.Errorf("checkExposure(%q, %q) = %v; want error %v", tt.addr, tt.token, err, tt.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "--http-token-file") {
			t.Errorf("checkExposure(%q): error %q does not say how to give a token", tt.addr, err)
		}
	}
}

func TestRequireToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pairs") })
	tests := []struct {
		token, header string
		want          int
	}{
		{"", "", http.StatusOK},
		{"s3cret", "Bearer s3cret", http.StatusOK},
		{"s3cret", "", http.StatusUnauthorized},
		{"s3cret", "Bearer s3cre", http.StatusUnauthorized},
		{"s3cret", "Bearer s3cretX", http.StatusUnauthorized},
		{"s3cret", "s3cret", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/state", nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		requireToken(tt.token, ok).ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("token %q, Authorization %q: status %d, want %d", tt.token, tt.header, rec.Code, tt.want)
		}
		if rec.Code != http.StatusOK && strings.Contains(rec.Body.String(), "pairs") {
			t.Errorf("token %q, Authorization %q: refused request saw the state", tt.token, tt.header)
		}
	}
}
