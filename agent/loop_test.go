package agent

import (
	"context"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/bulkhead-dc/bulkhead/wireauth"
)

// TestPacer: the agent's step timing (drive.Pacer). Steps are due every
// period from the start; a step a little late keeps the schedule, but the
// next one is at least half a period after it; a step more than a period
// late skips the periods missed.
func TestPacer(t *testing.T) {
	const p = 100 * time.Millisecond
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pc := drive.NewPacer(t0, p)
	if pc.Due() != at(100) {
		t.Fatalf("first step due at %v", pc.Due())
	}
	for i, tc := range []struct {
		now, next int
		skipped   bool
	}{
		{100, 200, false}, // on time
		{210, 300, false}, // a little late: the schedule holds
		{380, 430, false}, // late by 80 ms: due at 400, but not before 380 + 50
		{430, 500, false},
		{720, 820, true}, // more than a period late: 600 and 700 are skipped
		{820, 920, false},
	} {
		next, skipped := pc.Step(at(tc.now))
		if next != at(tc.next) || skipped != tc.skipped {
			t.Errorf("step %d at %d ms: next %v, skipped %v; want %d ms, %v", i, tc.now, next.Sub(t0), skipped, tc.next, tc.skipped)
		}
	}
}

// TestRunSteps: Run steps the mechanism every period until its context
// ends, then closes its data path and, with Restore, removes the limits
// it set.
func TestRunSteps(t *testing.T) {
	var mu sync.Mutex
	steps := 0
	mc := &script{act: func(_ string, step int, _ *mech.HostObs) mech.Actions {
		mu.Lock()
		steps = step
		mu.Unlock()
		if step == 1 {
			return mech.Actions{Limits: []mech.Limit{{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a1", Dst: "b1"}, Rate: 1e6}}}
		}
		return mech.Actions{}
	}}
	p := fake.New(fake.Options{Limiters: true})
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: mc, Path: p, Listen: loopback, Keys: wireauth.Keys(testMaster, "h1"), Restore: true})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// 10 ms periods for 200 ms
	if steps < 5 || int64(steps) != a.Steps() {
		t.Errorf("%d steps (agent counted %d)", steps, a.Steps())
	}
	if !p.Closed() {
		t.Error("data path not closed")
	}
	if got := p.Limits(); len(got) != 0 {
		t.Errorf("limits %v left after Run with Restore", got)
	}
}

// TestKeepOnStop: an agent with Restore that its driver stops to start
// another at once (KeepOnStop) leaves its limits in force.
func TestKeepOnStop(t *testing.T) {
	mc := &script{act: func(_ string, step int, _ *mech.HostObs) mech.Actions {
		if step == 1 {
			return mech.Actions{Limits: []mech.Limit{{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a1", Dst: "b1"}, Rate: 1e6}}}
		}
		return mech.Actions{}
	}}
	p := fake.New(fake.Options{Limiters: true})
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: mc, Path: p, Listen: loopback, Keys: wireauth.Keys(testMaster, "h1"), Restore: true})
	a.KeepOnStop()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if r, ok := p.Limit(a1b1); !ok || r != 1e6 || !p.Closed() {
		t.Errorf("a1→b1's limit %v (%v) after a kept stop, want 1e6 left in force; data path closed %v", r, ok, p.Closed())
	}
}

// noPairLimits is a mechanism whose agents set no pair limit (as
// Gatekeeper's, DRX's and none's).
type noPairLimits struct{ *script }

func (noPairLimits) Capabilities() mech.Capabilities { return mech.Capabilities{Schedulers: true} }

// TestLimitsLiftedForAnotherMechanism: a mechanism that sets no pair
// limit lifts the limits an agent of another mechanism left on the
// VMs' pair limiters (nothing else would ever change them); one that
// sets pair limits adopts them as they are.
func TestLimitsLiftedForAnotherMechanism(t *testing.T) {
	for _, c := range []struct {
		name string
		mc   mech.Mechanism
		want float64
	}{
		{"no pair limits", noPairLimits{&script{act: func(string, int, *mech.HostObs) mech.Actions { return mech.Actions{} }}}, math.Inf(1)},
		{"pair limits", &script{act: func(string, int, *mech.HostObs) mech.Actions { return mech.Actions{} }}, 1e6},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := fake.New(fake.Options{Limiters: true})
			// An earlier agent leaves a1→b1 at 1 Mbit/s.
			left := &script{act: func(string, int, *mech.HostObs) mech.Actions {
				return mech.Actions{Limits: []mech.Limit{{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a1", Dst: "b1"}, Rate: 1e6}}}
			}}
			if _, err := Apply(Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: left, Path: p}); err != nil {
				t.Fatal(err)
			}
			newTestAgent(t, Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: c.mc, Path: p, Listen: loopback, Keys: wireauth.Keys(testMaster, "h1")})
			if r, ok := p.Limit(a1b1); !ok || r != c.want {
				t.Errorf("a1→b1's limit %v (%v) once the new agent runs, want %v", r, ok, c.want)
			}
		})
	}
}

// TestApply: Apply steps the mechanism once and leaves its settings on
// the data path, with no agent running.
func TestApply(t *testing.T) {
	mc := &script{act: func(string, int, *mech.HostObs) mech.Actions {
		return mech.Actions{Limits: []mech.Limit{{Kind: mech.PairLimit, Pair: mech.PairID{Src: "a1", Dst: "b1"}, Rate: 1e6}},
			Messages: []mech.Message{{To: "h2", Body: map[string]any{"kind": "x"}}}}
	}}
	p := fake.New(fake.Options{Limiters: true})
	st, err := Apply(Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: mc, Path: p, Scale: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Steps != 1 || st.Writes != 1 {
		t.Errorf("stats %+v", st)
	}
	if r, ok := p.Limit(a1b1); !ok || r != 2e6 || !p.Closed() {
		t.Errorf("limit %v %v, data path closed %v", r, ok, p.Closed())
	}
}

// TestHTTPToken: the agent's /state and /metrics need its token, /healthz
// none; an address off loopback without a token is refused before Run
// builds anything.
func TestHTTPToken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	mc := &script{act: func(string, int, *mech.HostObs) mech.Actions { return mech.Actions{} }}
	a := newTestAgent(t, Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: mc, Path: fake.New(fake.Options{Limiters: true}),
		Listen: loopback, Keys: wireauth.Keys(testMaster, "h1"), HTTP: addr, HTTPToken: "tok3n"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	get := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for range 100 {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("GET %s: agent not serving", path)
		return 0
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", http.StatusOK},
		{"/state", "", http.StatusUnauthorized},
		{"/metrics", "", http.StatusUnauthorized},
		{"/state", "wrong", http.StatusUnauthorized},
		{"/state", "tok3n", http.StatusOK},
		{"/metrics", "tok3n", http.StatusOK},
	} {
		if got := get(tc.path, tc.token); got != tc.want {
			t.Errorf("GET %s with token %q: %d, want %d", tc.path, tc.token, got, tc.want)
		}
	}

	open := newTestAgent(t, Config{Host: "h1", Model: testModel(t1VMs...), Mechanism: mc, Path: fake.New(fake.Options{Limiters: true}),
		Listen: loopback, Keys: wireauth.Keys(testMaster, "h1"), HTTP: "0.0.0.0:0"})
	if err := open.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "--http-token-file") {
		t.Errorf("Run on 0.0.0.0 without a token: %v; want a refusal naming --http-token-file", err)
	}
}
