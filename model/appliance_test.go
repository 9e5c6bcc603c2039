package model_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/units"
)

func TestRequestBytes(t *testing.T) {
	cases := []struct {
		m         model.RequestType
		req, resp float64
	}{
		{model.RequestType{Type: "get", Size: 8000}, 64, 8000},
		{model.RequestType{Type: "read", Size: 512}, 64, 512},
		{model.RequestType{Type: "put", Size: 8000}, 8000, 64},
		{model.RequestType{Type: "write", Size: 64000}, 64000, 64},
		{model.RequestType{Type: "cwrite", Size: 100}, 100, 64},
		{model.RequestType{Type: "rc4", Size: 1500}, 1500, 1500},
		{model.RequestType{Type: "aes", Size: 1500}, 1500, 1500},
		{model.RequestType{Type: "compress", Size: 1500}, 1500, 1500},
		{model.RequestType{Type: "lookup", Size: 300}, 300, 300},
		{model.RequestType{Type: "get", Size: 8000, Request: 200}, 200, 8000},
		{model.RequestType{Type: "compress", Size: 1500, Response: 500}, 1500, 500},
	}
	for _, c := range cases {
		if req, resp := c.m.Bytes(); req != c.req || resp != c.resp {
			t.Errorf("%+v.Bytes() = %v, %v; want %v, %v", c.m, req, resp, c.req, c.resp)
		}
	}
}

func TestVirtualCost(t *testing.T) {
	fig6b := model.DefaultVirtualCost()
	step := model.VirtualCost{Points: []model.CostPoint{{Size: 0, Tokens: 0}, {Size: 1000, Tokens: 1000}}, Step: 1000}
	flat := model.VirtualCost{Points: []model.CostPoint{{Size: 100, Tokens: 5}}}
	cases := []struct {
		v          model.VirtualCost
		size, want float64
	}{
		{fig6b, 0, 8000}, {fig6b, 512, 8000}, {fig6b, 8000, 8000}, {fig6b, 12000, 12000},
		{fig6b, 16000, 16000}, {fig6b, 64000, 64000}, {fig6b, 1e6, 1e6},
		{step, 0, 0}, {step, 1, 1000}, {step, 1000, 1000}, {step, 1001, 2000}, {step, 64500, 65000},
		{flat, 0, 5}, {flat, 1e9, 5},
		{model.VirtualCost{}, 10, 0},
	}
	for _, c := range cases {
		if got := c.v.Cost(c.size); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%+v.Cost(%v) = %v; want %v", c.v, c.size, got, c.want)
		}
	}

	a := &model.Appliance{Model: "kv", VirtualCost: []model.VirtualCost{{Type: "put", Points: step.Points, Step: step.Step}}}
	if got := a.Tokens("put", 1500); got != 2000 {
		t.Errorf("put = %v", got)
	}
	if got := a.Tokens("get", 1500); got != 8000 { // no entry for all types: Fig. 6(b)
		t.Errorf("get = %v", got)
	}
	a.VirtualCost = append(a.VirtualCost, flat)
	if got := a.Tokens("get", 1500); got != 5 {
		t.Errorf("get with an all-types entry = %v", got)
	}
	if got := a.CostFunction("put"); got.Step != 1000 {
		t.Errorf("CostFunction(put) = %+v", got)
	}
}

// TestPresets pins the model presets and the capacities docs/scenarios.md
// gives for them (tokens/s with the default virtual cost, one slot).
func TestPresets(t *testing.T) {
	us := func(f float64) units.Duration { return units.Duration(f * float64(time.Microsecond)) }
	presets := map[string][]model.ServiceCost{
		"kv": {{Type: "get", Base: us(2.8), PerKB: us(0.1)}, {Type: "put", Base: us(2.8), PerKB: us(0.1)}},
		"filestore": {{Type: "read", Base: us(3), PerKB: us(0.28)}, {Type: "write", Base: us(5), PerKB: us(0.5)},
			{Type: "cwrite", Base: us(4), PerKB: us(0.35)}},
		"encryption": {{Type: "rc4", Base: us(0.4), PerKB: us(0.2)}, {Type: "aes", Base: us(1.2), PerKB: us(0.6)}},
		"custom":     nil,
	}
	for m, want := range presets {
		if got, ok := model.ModelCosts(m); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("ModelCosts(%s) = %v, %v; want %v", m, got, ok, want)
		}
	}
	if _, ok := model.ModelCosts("redis"); ok {
		t.Error("ModelCosts(redis) known")
	}

	type rt = model.RequestType
	mix := func(typ string, size float64) []rt { return []rt{{Type: typ, Size: units.Bytes(size), Fraction: 1}} }
	rw := func(read, write string, size, readFrac float64) []rt {
		return []rt{{Type: read, Size: units.Bytes(size), Fraction: readFrac}, {Type: write, Size: units.Bytes(size), Fraction: 1 - readFrac}}
	}
	caps := []struct {
		model string
		mix   []rt
		mts   float64 // MT/s, rounded
	}{
		{"kv", mix("get", 64000), 6957},
		{"kv", mix("put", 64000), 6957},
		{"kv", mix("get", 8000), 2222},
		{"kv", mix("get", 512), 2806},
		{"kv", rw("get", "put", 64000, 0.56), 6957}, // Fig. 10's tenant D
		{"filestore", mix("read", 64000), 3059},
		{"filestore", mix("write", 64000), 1730},
		{"filestore", mix("cwrite", 64000), 2424},
		{"filestore", mix("read", 8000), 1527},
		{"filestore", mix("write", 8000), 889},
		{"filestore", mix("write", 512), 1522},
		{"filestore", rw("read", "write", 64000, 0.56), 2286}, // D
		{"filestore", rw("read", "write", 512, 0.01), 1528},   // C
		{"encryption", mix("rc4", 8000), 4000},
		{"encryption", mix("rc4", 64000), 4848},
		{"encryption", mix("aes", 8000), 1333},
		{"encryption", mix("aes", 64000), 1616},
	}
	for _, c := range caps {
		a := &model.Appliance{Name: c.model, Model: c.model}
		got, err := a.Capacity(c.mix)
		if err != nil || math.Round(got/1e6) != c.mts {
			t.Errorf("%s %v: capacity %v MT/s, %v; want %v", c.model, c.mix, got/1e6, err, c.mts)
		}
	}

	// Mixes shared by token shares (as Pulsar's allocations share them):
	// Fig. 14(a) phase 2 (C:D = 2:1 at the key-value store) and §6.1 (C and
	// D 1:1 at the filestore).
	shared := func(name string, mixes [][]rt, shares []float64) float64 {
		a := &model.Appliance{Name: name, Model: name}
		var perToken float64
		for i, m := range mixes {
			c, err := a.Capacity(m)
			if err != nil {
				t.Fatal(err)
			}
			perToken += shares[i] / c
		}
		return math.Round(1 / perToken / 1e6)
	}
	cKV, dKV := rw("get", "put", 512, 0.01), rw("get", "put", 64000, 0.56)
	if got := shared("kv", [][]rt{cKV, dKV}, []float64{2. / 3, 1. / 3}); got != 3502 {
		t.Errorf("kv C+D = %v MT/s", got)
	}
	cFS, dFS := rw("read", "write", 512, 0.01), rw("read", "write", 64000, 0.56)
	if got := shared("filestore", [][]rt{cFS, dFS}, []float64{0.5, 0.5}); got != 1832 {
		t.Errorf("filestore C+D = %v MT/s", got)
	}

	// Service times, overrides, parallelism, errors.
	a := &model.Appliance{Name: "kv", Model: "kv", Parallelism: 2,
		Costs: []model.ServiceCost{{Type: "get", Base: us(1)}, {Type: "scan", Base: us(10), PerKB: us(1)}}}
	if got := a.Types(); !reflect.DeepEqual(got, []string{"get", "put", "scan"}) {
		t.Errorf("Types = %v", got)
	}
	for _, c := range []struct {
		typ  string
		size float64
		want time.Duration
	}{{"get", 8000, time.Microsecond}, {"put", 8000, 3600 * time.Nanosecond}, {"put", 512, 2851 * time.Nanosecond}, {"scan", 2500, 12500 * time.Nanosecond}} {
		if got, err := a.ServiceTime(c.typ, c.size); err != nil || got != c.want {
			t.Errorf("ServiceTime(%s, %v) = %v, %v; want %v", c.typ, c.size, got, err, c.want)
		}
	}
	if c, ok := a.ServiceCost("put"); !ok || c.Base != us(2.8) {
		t.Errorf("ServiceCost(put) = %v, %v", c, ok)
	}
	if got, _ := a.Capacity(mix("get", 8000)); got != 2*8000/1e-6 {
		t.Errorf("capacity with parallelism 2 = %v", got)
	}
	if _, err := a.ServiceTime("read", 10); err == nil || err.Error() != `appliance "kv": unknown request type "read" (use get, put or scan)` {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := a.ServiceTime("get", -1); err == nil || err.Error() != `appliance "kv": invalid request size -1` {
		t.Errorf("negative size: %v", err)
	}
	if _, err := a.Capacity(nil); err == nil || err.Error() != `appliance "kv": the mix costs no service time` {
		t.Errorf("empty mix: %v", err)
	}
}
