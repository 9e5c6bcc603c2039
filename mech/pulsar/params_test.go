package pulsar

import (
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

func TestParamsDefaults(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != Name {
		t.Errorf("name %q", m.Name())
	}
	if got, want := m.Params(), DefaultParams(); got != want {
		t.Errorf("params %+v, want %+v", got, want)
	}
	want := Params{
		Interval: time.Second, EWMA: 0.5, Headroom: 0.03, DefaultRate: 1e6,
		LocalPolicy: DRF, GlobalPolicy: HDRF, GlobalWeight: WeightMax, Alpha: 0.5,
		Readings: 3, StableThreshold: 0.01, RestartThreshold: 0.10, Tolerance: 0.02,
		QueueDelay: 0.5, ForgetIntervals: 5, Scope: ScopeAll,
	}
	if DefaultParams() != want {
		t.Errorf("DefaultParams() = %+v, want %+v", DefaultParams(), want)
	}
	var _ mech.Central = m
}

func TestParamsParse(t *testing.T) {
	p, err := ParseParams(map[string]any{
		"interval": "500ms", "ewma": 0.25, "headroom": 0.05, "default_rate": 2000,
		"local_policy": "maxmin", "global_policy": "drf", "global_weight": "equal",
		"alpha": 1, "readings": 2, "stable_threshold": 0.02, "restart_threshold": 0.2,
		"tolerance": 0.01, "queue_delay": 0.1, "forget_intervals": 7, "scope": "network",
		"probe_intervals": 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Params{
		Interval: 500 * time.Millisecond, EWMA: 0.25, Headroom: 0.05, DefaultRate: 2000,
		LocalPolicy: MaxMin, GlobalPolicy: DRF, GlobalWeight: WeightEqual, Alpha: 1,
		Readings: 2, StableThreshold: 0.02, RestartThreshold: 0.2, Tolerance: 0.01,
		QueueDelay: 0.1, ForgetIntervals: 7, Scope: ScopeNetwork, ProbeIntervals: 4,
	}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
}

func TestParamsErrors(t *testing.T) {
	cases := []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"alpha": "x"}, `mechanism.params.alpha: expected a number, got "x"`},
		{map[string]any{"ewma": 2}, "mechanism.params.ewma: must be in (0, 1], got 2"},
		{map[string]any{"ewma": 0}, "mechanism.params.ewma: must be in (0, 1], got 0"},
		{map[string]any{"headroom": 0.9}, "mechanism.params.headroom: must be in [0, 0.5], got 0.9"},
		{map[string]any{"default_rate": -1}, "mechanism.params.default_rate: must be ≥ 0"},
		{map[string]any{"readings": 0}, "mechanism.params.readings: must be ≥ 1, got 0"},
		{map[string]any{"readings": 1.5}, "mechanism.params.readings: expected an integer, got 1.5"},
		{map[string]any{"probe_intervals": -1}, "mechanism.params.probe_intervals: must be ≥ 0, got -1"},
		{map[string]any{"interval": "soon"}, `mechanism.params.interval: expected a duration such as "60ms", got "soon"`},
		{map[string]any{"interval": "0s"}, "mechanism.params.interval: must be > 0"},
		{map[string]any{"global_policy": "fifo"}, `mechanism.params.global_policy: unknown value "fifo" (known: hdrf, drf, maxmin, firstfit)`},
		{map[string]any{"global_weight": "price"}, `mechanism.params.global_weight: unknown value "price" (known: max, total, appliances, network, equal)`},
		{map[string]any{"local_policy": "hdrf"}, `mechanism.params.local_policy: unknown value "hdrf" (known: drf, maxmin, firstfit)`},
		{map[string]any{"scope": "links"}, `mechanism.params.scope: unknown value "links"`},
		{map[string]any{"global_weight": 3}, "mechanism.params.global_weight: expected a string, got 3"},
		{map[string]any{"alpah": 1}, "mechanism.params.alpah: unknown parameter"},
		{map[string]any{"stable_threshold": 1}, "mechanism.params.stable_threshold: must be in (0, 1), got 1"},
	}
	for _, c := range cases {
		_, err := New(c.params)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%v) = %v, want error containing %q", c.params, err, c.want)
		}
	}
	// Several problems are all reported.
	_, err := New(map[string]any{"alpha": "x", "ewma": 3})
	if err == nil || !strings.Contains(err.Error(), "alpha") || !strings.Contains(err.Error(), "ewma") {
		t.Errorf("two errors: got %v", err)
	}
}

func TestVariants(t *testing.T) {
	for _, c := range []struct {
		new   func(map[string]any) (*Mechanism, error)
		name  string
		scope Scope
	}{
		{NewAppliances, NameAppliances, ScopeAppliances},
		{NewNetwork, NameNetwork, ScopeNetwork},
	} {
		m, err := c.new(map[string]any{"alpha": 0.2})
		if err != nil {
			t.Fatal(err)
		}
		if m.Name() != c.name || m.Params().Scope != c.scope || m.Params().Alpha != 0.2 {
			t.Errorf("%s: name %q scope %q alpha %v", c.name, m.Name(), m.Params().Scope, m.Params().Alpha)
		}
		if _, err := c.new(map[string]any{"scope": "all"}); err == nil || !strings.Contains(err.Error(), "mechanism.params.scope: unknown parameter") {
			t.Errorf("%s with scope: %v", c.name, err)
		}
	}
	m, err := New(map[string]any{"scope": "appliances"})
	if err != nil || m.Name() != NameAppliances {
		t.Errorf("pulsar with scope appliances: %v %v", m, err)
	}
	a, err := m.NewAgent(mech.Env{Host: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	if act := a.Step(&mech.HostObs{}, nil); len(act.Limits)+len(act.Messages) != 0 {
		t.Errorf("agent acted: %+v", act)
	}
}
