package drx

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestPricing(t *testing.T) {
	// §V-A: a 30% degradation with 2 VMEs in the DCCR set raises each
	// price by 15%; §V-B: with I/O in a 9:1 ratio by 27% and 3%.
	cases := []struct {
		name   string
		policy string
		io     []float64
		pd     float64
		want   []float64 // new prices from 1
	}{
		{"equal blame", PolicyEB, []float64{9, 1}, 0.30, []float64{1.15, 1.15}},
		{"hurt based", PolicyHB, []float64{9, 1}, 0.30, []float64{1.27, 1.03}},
		{"hurt based, no I/O", PolicyHB, []float64{0, 0}, 0.30, []float64{1.15, 1.15}},
		{"equal blame, three", PolicyEB, []float64{1, 1, 1}, 0.30, []float64{1.1, 1.1, 1.1}},
	}
	for _, c := range cases {
		b := Blame(c.policy, c.io)
		for i := range b {
			if got := NewPrice(1, c.pd, b[i], 1); !near(got, c.want[i], 1e-12) {
				t.Errorf("%s: VME %d price %g, want %g", c.name, i, got, c.want[i])
			}
		}
	}
	if got := NewPrice(2, 0.3, 0.5, 0.5); !near(got, 2.15, 1e-12) {
		t.Errorf("alpha 0.5: price %g, want 2.15", got)
	}
}

func TestCap(t *testing.T) {
	cases := []struct {
		name                   string
		oc, op, np, betaC, flo float64
		want                   float64
	}{
		{"15% price rise, beta 1", 100, 1, 1.15, 1, 25, 85},
		{"15% rise from cap 80", 80, 1, 1.15, 1, 25, 68},
		{"beta 0.5", 100, 2, 2.3, 0.5, 25, 92.5},
		{"floor", 100, 1, 2, 1, 25, 25},
		{"no Resos left", 90, 1, 1.01, CapBeta(50, 0), 25, 25},
		{"no rise", 70, 1, 1, 1, 25, 70},
	}
	for _, c := range cases {
		if got := NewCap(c.oc, c.op, c.np, c.betaC, c.flo); !near(got, c.want, 1e-9) {
			t.Errorf("%s: cap %g, want %g", c.name, got, c.want)
		}
	}
	if got := CapBeta(40, 80); got != 0.5 {
		t.Errorf("CapBeta(40, 80) = %g", got)
	}
	if got := StepCap(100, 5, 1, 25); got != 95 {
		t.Errorf("CC step from 100: %g", got)
	}
	if got := StepCap(27, 5, 1, 25); got != 25 {
		t.Errorf("CC step below the floor: %g", got)
	}
	if got := StepCap(100, 5, 0.6, 25); got != 97 {
		t.Errorf("PC step with ratio 0.6: %g", got)
	}
}

func TestParse(t *testing.T) {
	cfg, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Policy != PolicyEB || cfg.Scope != ScopeDist || cfg.Epoch != 60*time.Second || cfg.Interval != time.Second ||
		cfg.CapStep != 5 || cfg.MinCap != 25 || cfg.Link != 32e9 {
		t.Errorf("defaults: %+v", cfg)
	}
	bad := []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"policy": "fair"}, `mechanism.params.policy: unknown policy "fair"`},
		{map[string]any{"scope": "global"}, `mechanism.params.scope: unknown scope "global"`},
		{map[string]any{"alpha": 0}, "mechanism.params.alpha: must be in (0, 1]"},
		{map[string]any{"alpha": "x"}, "mechanism.params.alpha: expected a number"},
		{map[string]any{"interval": "2m"}, "mechanism.params.interval: must be positive and at most epoch"},
		{map[string]any{"epoch": "0"}, "mechanism.params.epoch: must be positive"},
		{map[string]any{"min_cap": 0}, "mechanism.params.min_cap: must be in (0, 100]"},
		{map[string]any{"cap_step": 100}, "mechanism.params.cap_step: must be in (0, 100)"},
		{map[string]any{"link": "fast"}, "mechanism.params.link: expected a rate"},
		{map[string]any{"resos": -1}, "mechanism.params.resos: must be a non-negative"},
		{map[string]any{"base_price": 0}, "mechanism.params.base_price: must be a positive"},
		{map[string]any{"polcy": "eb"}, "mechanism.params.polcy: unknown parameter"},
	}
	for _, c := range bad {
		_, err := Parse(c.params)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%v) = %v, want %q", c.params, err, c.want)
		}
	}
	if _, err := NewVariant(PolicyHB, ScopeLocal)(map[string]any{"policy": "eb"}); err == nil ||
		!strings.Contains(err.Error(), "mechanism.params.policy: set by the mechanism's name drx-hb-local") {
		t.Errorf("variant with a policy parameter: %v", err)
	}
	m, err := NewVariant(PolicyCC, ScopeDist)(map[string]any{"min_cap": 30})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(mech.Central); !ok || m.Name() != "drx-cc-dist" || m.(*Distributed).Config().MinCap != 30 {
		t.Errorf("drx-cc-dist: %T %s", m, m.Name())
	}
	l, err := NewVariant(PolicyEB, ScopeLocal)(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.(mech.Central); ok {
		t.Errorf("the local scope has no platform manager")
	}
}

// The test cluster: tenant N (SLA 15%) has n1 on h1 and n2 on h2; H has a
// VM on each of h1, h2, h3; L on h1 and h3; h3 hosts no N VM.
func testVMs() []mech.VM {
	return []mech.VM{
		{Name: "h1", Tenant: "H", Host: "s1"},
		{Name: "h2", Tenant: "H", Host: "s2"},
		{Name: "h3", Tenant: "H", Host: "s3"},
		{Name: "l1", Tenant: "L", Host: "s1"},
		{Name: "l3", Tenant: "L", Host: "s3"},
		{Name: "n1", Tenant: "N", Host: "s1"},
		{Name: "n2", Tenant: "N", Host: "s2"},
	}
}

func testEnv(host string) mech.Env {
	return mech.Env{Host: host, VMs: testVMs(), SLA: map[string]float64{"N": 0.15}}
}

func mustAgent(t *testing.T, cfg Config, host string) *Agent {
	t.Helper()
	a, err := NewAgent(cfg, testEnv(host), nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// obs builds a host observation at second s of the VMs listed as
// name → {out rate, in rate, out demand, in demand} (bits/s).
func obs(s int, vms map[string][4]float64) *mech.HostObs {
	o := &mech.HostObs{Now: time.Duration(s) * time.Second, Period: time.Second}
	for n, v := range vms {
		o.VMs = append(o.VMs, mech.VMObs{VM: n, OutRate: v[0], InRate: v[1], OutDemand: v[2], InDemand: v[3]})
	}
	return o
}

func limitsOf(act mech.Actions) map[string]float64 {
	m := map[string]float64{}
	for _, l := range act.Limits {
		if l.Kind != mech.VMEgress {
			continue
		}
		m[l.VM] = l.Rate
	}
	return m
}

var inf = math.Inf(1)

func TestLocalEqualBlame(t *testing.T) {
	cfg := Defaults()
	cfg.Scope = ScopeLocal
	cfg.Resos = 1e12 // plenty: β_C = EL/RL ≈ EL
	a := mustAgent(t, cfg, "s1")
	// n1 gets half of its demand (PD 50%): H and L, on s1, each take half
	// the blame: prices 1 → 1.25, caps 100 → 100·(1 − 0.25·β_C).
	act := a.Step(obs(1, map[string][4]float64{
		"n1": {1e9, 1e9, 2e9, 2e9},
		"h1": {6e9, 6e9, 8e9, inf},
		"l1": {10e9, 10e9, inf, inf},
	}), nil)
	if a.Price("H") != 1.25 || a.Price("L") != 1.25 || a.Price("N") != 1 {
		t.Errorf("prices H %g L %g N %g, want 1.25 1.25 1", a.Price("H"), a.Price("L"), a.Price("N"))
	}
	el := 100 * 59.0 / 60
	rl := 100 * (1 - (12e9/8/MTU)/1e12)
	want := 100 * (1 - 0.25*el/rl)
	c, _ := a.Cap("h1")
	if !near(c, want, 1e-9) {
		t.Errorf("h1 cap %g, want %g", c, want)
	}
	lim := limitsOf(act)
	// h1's demand is bounded: its limit is the cap times its demand; l1's
	// is unbounded: the cap times its rate when last uncapped.
	wantL := 100 * (1 - 0.25*el/(100*(1-(20e9/8/MTU)/1e12)))
	if !near(lim["h1"], want/100*8e9, 1) || !near(lim["l1"], wantL/100*10e9, 1) {
		t.Errorf("limits %v, want h1 %g l1 %g", lim, want/100*8e9, wantL/100*10e9)
	}
	if _, ok := lim["n1"]; ok {
		t.Errorf("the victim's VM was limited")
	}
	// Within the SLA: nothing changes, nothing is re-sent.
	act = a.Step(obs(2, map[string][4]float64{
		"n1": {1.8e9, 1.8e9, 2e9, 2e9},
		"h1": {5e9, 5e9, 8e9, inf},
		"l1": {7e9, 7e9, inf, inf},
	}), nil)
	if len(act.Limits) != 0 || a.Price("H") != 1.25 {
		t.Errorf("within the SLA: limits %v, price %g", act.Limits, a.Price("H"))
	}
}

func TestLocalHurtBased(t *testing.T) {
	cfg := Defaults()
	cfg.Scope = ScopeLocal
	cfg.Policy = PolicyHB
	a := mustAgent(t, cfg, "s1")
	// Local I/O of H and L in a 1:3 ratio; PD 40%.
	a.Step(obs(1, map[string][4]float64{
		"n1": {0.6e9, 0.6e9, 1e9, 1e9},
		"h1": {1e9, 1e9, inf, inf},
		"l1": {3e9, 3e9, inf, inf},
	}), nil)
	if !near(a.Price("H"), 1.1, 1e-12) || !near(a.Price("L"), 1.3, 1e-12) {
		t.Errorf("prices H %g L %g, want 1.1 1.3", a.Price("H"), a.Price("L"))
	}
	ch, _ := a.Cap("h1")
	cl, _ := a.Cap("l1")
	if !(cl < ch && ch < 100) {
		t.Errorf("caps h1 %g l1 %g: the bigger hurt must be capped harder", ch, cl)
	}
}

func TestLocalCapOnly(t *testing.T) {
	for _, c := range []struct {
		policy string
		h, l   float64 // caps after one violation
	}{
		{PolicyCC, 95, 95},
		{PolicyPC, 100 - 5*0.25, 100 - 5*0.75},
	} {
		cfg := Defaults()
		cfg.Scope = ScopeLocal
		cfg.Policy = c.policy
		a := mustAgent(t, cfg, "s1")
		o := map[string][4]float64{
			"n1": {0.5e9, 0.5e9, 1e9, 1e9},
			"h1": {1e9, 1e9, inf, inf},
			"l1": {3e9, 3e9, inf, inf},
		}
		a.Step(obs(1, o), nil)
		ch, _ := a.Cap("h1")
		cl, _ := a.Cap("l1")
		if !near(ch, c.h, 1e-9) || !near(cl, c.l, 1e-9) || a.Price("H") != 1 {
			t.Errorf("%s: caps h1 %g l1 %g (want %g %g), price %g", c.policy, ch, cl, c.h, c.l, a.Price("H"))
		}
		// Persisting violations walk CC's caps down to the floor and no
		// further.
		for s := 2; s < 40; s++ {
			a.Step(obs(s, o), nil)
		}
		if cl, _ = a.Cap("l1"); cl != 25 {
			t.Errorf("%s: cap after 40 violations %g, want the floor 25", c.policy, cl)
		}
	}
}

func TestResos(t *testing.T) {
	cfg := Defaults()
	// 10 s of 1 Gbps each way at price 1.
	cfg.Resos = 2 * 1e9 / 8 / MTU * 10
	a := mustAgent(t, cfg, "s3")
	busy := map[string][4]float64{"h3": {1e9, 1e9, 1e9, 1e9}, "l3": {0.1e9, 0.1e9, 1e9, 1e9}}
	for s := 1; s <= 10; s++ {
		if act := a.Step(obs(s, busy), nil); len(act.Limits) != 0 {
			t.Fatalf("second %d: limits %v without any price change", s, act.Limits)
		}
	}
	if left, _ := a.ResosLeft("h3"); left != 0 {
		t.Errorf("h3 Resos left %g, want 0", left)
	}
	if left, _ := a.ResosLeft("l3"); !near(left, 0.9*cfg.Resos, 1e-6*cfg.Resos) {
		t.Errorf("l3 Resos left %g, want 90%% of %g", left, cfg.Resos)
	}
	// A 10% price rise (with one more interval charged): h3, spent out
	// (β_C infinite), goes to the floor; l3 (RL 89% at EL 5/6) loses
	// 10%·(83.3/89) of its cap.
	up := []mech.Message{{To: "s3", Body: Update{Changes: []Change{
		{Tenant: "H", OldPrice: 1, NewPrice: 1.1}, {Tenant: "L", OldPrice: 1, NewPrice: 1.1}}}}}
	act := a.Step(obs(10, busy), up)
	if c, _ := a.Cap("h3"); c != 25 {
		t.Errorf("h3 out of Resos: cap %g, want the floor", c)
	}
	want := 100 * (1 - 0.1*(100*50.0/60)/89)
	if c, _ := a.Cap("l3"); !near(c, want, 1e-6) {
		t.Errorf("l3: cap %g, want %g", c, want)
	}
	if lim := limitsOf(act); !near(lim["h3"], 0.25e9, 1) || !near(lim["l3"], want/100*1e9, 1) {
		t.Errorf("limits %v, want h3 250 Mbps (25%% of its demand), l3 %g", lim, want/100*1e9)
	}
	// Charging follows the new price: l3 now pays 1.1 Resos per MTU.
	before, _ := a.ResosLeft("l3")
	a.Step(obs(11, busy), nil)
	after, _ := a.ResosLeft("l3")
	if spent := before - after; !near(spent, 1.1*0.2e9/8/MTU, 1e-6) {
		t.Errorf("l3 spent %g Resos, want %g", spent, 1.1*0.2e9/8/MTU)
	}
	// A new epoch renews every allocation; caps stay.
	a.Step(obs(60, busy), nil)
	if left, _ := a.ResosLeft("h3"); left != cfg.Resos {
		t.Errorf("new epoch: h3 Resos %g, want %g", left, cfg.Resos)
	}
	if c, _ := a.Cap("h3"); c != 25 {
		t.Errorf("new epoch: cap %g, want it kept", c)
	}
}

func mustController(t *testing.T, cfg Config) *Controller {
	t.Helper()
	env := mech.ControllerEnv{VMs: testVMs(), VDCs: []mech.VDC{{Tenant: "H"}, {Tenant: "L"}, {Tenant: "N", SLA: 0.15}}}
	c, err := NewController(cfg, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctlObs(s int, vms map[string][4]float64) *mech.ControllerObs {
	h := obs(s, vms)
	return &mech.ControllerObs{Now: h.Now, Period: h.Period, VMs: h.VMs}
}

func TestDistributed(t *testing.T) {
	for _, c := range []struct {
		policy string
		h, l   float64 // shares of the blame: β_P (EB, HB) or of the step (CC, PC)
	}{
		{PolicyEB, 0.5, 0.5},
		{PolicyHB, 0.25, 0.75},
		{PolicyCC, 1, 1},
		{PolicyPC, 0.25, 0.75},
	} {
		cfg := Defaults()
		cfg.Policy = c.policy
		pm := mustController(t, cfg)
		// n1 on s1 is degraded by 40%, n2 on s2 is fine: the DCCR set is
		// the VMEs on s1, {H, L}; cluster-wide I/O of H and L is 1:3.
		o := map[string][4]float64{
			"n1": {0.6e9, 0.6e9, 1e9, 1e9},
			"n2": {1e9, 1e9, 1e9, 1e9},
			"h1": {1e9, 1e9, inf, inf}, "h2": {0, 0, 0, 0}, "h3": {0.5e9, 0.5e9, inf, inf},
			"l1": {3e9, 3e9, inf, inf}, "l3": {1.5e9, 1.5e9, inf, inf},
		}
		act := pm.Step(ctlObs(1, o))
		// PD of N is 1 − 3.2/4 = 20%.
		to := map[string]Update{}
		for _, m := range act.Messages {
			u, ok := Decode(m.Body)
			if !ok {
				t.Fatalf("%s: undecodable message %#v", c.policy, m.Body)
			}
			to[m.To] = u
		}
		if len(to) != 3 || len(to["s2"].Changes) != 1 || len(to["s3"].Changes) != 2 {
			t.Fatalf("%s: updates %v: want every host of H and L, s2 only H's", c.policy, to)
		}
		got := map[string]Change{}
		for _, ch := range to["s1"].Changes {
			got[ch.Tenant] = ch
		}
		if c.policy == PolicyEB || c.policy == PolicyHB {
			pH, pL := 1+0.2*c.h, 1+0.2*c.l
			if !near(got["H"].NewPrice, pH, 1e-12) || !near(got["L"].NewPrice, pL, 1e-12) || got["H"].OldPrice != 1 {
				t.Errorf("%s: changes %v, want H %g L %g", c.policy, got, pH, pL)
			}
		} else if !near(got["H"].CapStep, 5*c.h, 1e-12) || !near(got["L"].CapStep, 5*c.l, 1e-12) {
			t.Errorf("%s: changes %v, want steps H %g L %g", c.policy, got, 5*c.h, 5*c.l)
		}
		// The next interval predates the agents applying the change: the
		// PM holds; the one after acts again.
		if act := pm.Step(ctlObs(2, o)); len(act.Messages) != 0 {
			t.Errorf("%s: acted on a stale interval", c.policy)
		}
		if act := pm.Step(ctlObs(3, o)); len(act.Messages) != 3 {
			t.Errorf("%s: no action on a persisting violation: %v", c.policy, act.Messages)
		}

		// A host agent applies the update to all its VMs of the VME,
		// whether or not it saw any degradation itself.
		ha := mustAgent(t, cfg, "s3")
		ha.Step(obs(1, map[string][4]float64{"h3": {0.5e9, 0.5e9, inf, inf}, "l3": {1.5e9, 1.5e9, inf, inf}}),
			[]mech.Message{{From: "controller", To: "s3", Body: to["s3"]}})
		ch3, _ := ha.Cap("h3")
		cl3, _ := ha.Cap("l3")
		if !(ch3 < 100 && cl3 < 100) {
			t.Errorf("%s: s3 caps h3 %g l3 %g after the update", c.policy, ch3, cl3)
		}
		if c.policy == PolicyEB || c.policy == PolicyHB {
			if ha.Price("L") != got["L"].NewPrice {
				t.Errorf("%s: s3 price of L %g", c.policy, ha.Price("L"))
			}
		}
	}
}

func TestDistributedNoViolation(t *testing.T) {
	pm := mustController(t, Defaults())
	act := pm.Step(ctlObs(1, map[string][4]float64{
		"n1": {0.9e9, 0.9e9, 1e9, 1e9}, "n2": {1e9, 1e9, 1e9, 1e9},
		"h1": {1e9, 1e9, inf, inf}, "l1": {3e9, 3e9, inf, inf},
	}))
	if len(act.Messages) != 0 {
		t.Errorf("within the SLA (PD 5%%): %v", act.Messages)
	}
	// An idle SLA VME (no demand) is not degraded.
	act = pm.Step(ctlObs(2, map[string][4]float64{"n1": {0, 0, 0, 0}, "h1": {1e9, 1e9, inf, inf}}))
	if len(act.Messages) != 0 {
		t.Errorf("idle SLA VME: %v", act.Messages)
	}
}

func TestDecodeJSON(t *testing.T) {
	u := Update{Changes: []Change{{Tenant: "L", OldPrice: 1, NewPrice: 1.2}}}
	data, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []any{u, &u, json.RawMessage(data), data, string(data)} {
		got, ok := Decode(body)
		if !ok || len(got.Changes) != 1 || got.Changes[0].NewPrice != 1.2 {
			t.Errorf("Decode(%T) = %v %v", body, got, ok)
		}
	}
	for _, body := range []any{`{"kind":"other"}`, `{"kind":"drx.update"}`, 42, (*Update)(nil)} {
		if _, ok := Decode(body); ok {
			t.Errorf("Decode(%#v) accepted", body)
		}
	}
}

func TestBadEnv(t *testing.T) {
	env := testEnv("s1")
	env.SLA = map[string]float64{"N": 1.5}
	if _, err := NewAgent(Defaults(), env, nil); err == nil || !strings.Contains(err.Error(), "SLA 1.5") {
		t.Errorf("SLA 1.5: %v", err)
	}
	if _, err := NewAgent(Defaults(), mech.Env{VMs: testVMs()}, nil); err == nil {
		t.Errorf("no host accepted")
	}
}
