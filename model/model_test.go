package model_test

import (
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/units"
	"gopkg.in/yaml.v3"
)

// base is a small valid model: tenant A with a VDC on the key-value
// store, B with asymmetric hoses and addresses, C best effort.
func base() *model.Model {
	m := &model.Model{
		Tenants: []model.Tenant{
			{Name: "A", Weight: 2, VMs: []model.VM{
				{Name: "a2", Tenant: "A", Host: "s2", In: 1e9, Out: 1e9},
				{Name: "a1", Tenant: "A", Host: "s1", In: 1e9, Out: 1e9},
			}, VDC: &model.VDC{
				Appliances: []model.ApplianceGuarantee{{Appliance: "kv", Guarantee: 1.6e9}},
				Weights:    map[string]float64{"a1->kv": 2, "a1->a2": 0.5},
			}},
			{Name: "B", SLA: 0.15, VMs: []model.VM{
				{Name: "b1", Tenant: "B", Host: "s1", In: 200e6, Out: 500e6, Interface: "veth-b1",
					Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::2")}},
			}},
			{Name: "C", BestEffort: true, VMs: []model.VM{{Name: "c1", Tenant: "C", Host: "s2"}}},
		},
		Appliances: []model.Appliance{
			{Name: "kv", Server: "s3", Model: model.ModelKV, CapacityMax: 4e9},
			{Name: "enc", Hypervisor: true, Model: model.ModelEncryption},
		},
	}
	m.ApplyDefaults()
	return m
}

func messages(err error) []string {
	var out []string
	for _, fe := range model.FieldErrors(err) {
		out = append(out, fe.Error())
	}
	return out
}

// TestValidate checks one kind of problem per case: the exact messages,
// in order, and nothing else.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(m *model.Model)
		want   []string
	}{
		{"valid", func(*model.Model) {}, nil},
		{"empty", func(m *model.Model) { *m = model.Model{} }, nil},
		{"tenant name", func(m *model.Model) { m.Tenants[1].Name = ""; m.Tenants[1].VMs[0].Tenant = "" },
			[]string{"tenants[1].name: required"}},
		{"duplicate tenant", func(m *model.Model) { m.Tenants[2].Name = "A"; m.Tenants[2].VMs[0].Tenant = "A" },
			[]string{`tenants[2].name: duplicate tenant "A" (also tenants[0])`}},
		{"sla and weight", func(m *model.Model) { m.Tenants[1].SLA = 1; m.Tenants[0].Weight = math.Inf(1) },
			[]string{"tenants[0].weight: must be a non-negative number, got +Inf",
				"tenants[1].sla: must be a fraction in [0, 1) (0.15 for within 15%), got 1"}},
		{"VM name", func(m *model.Model) { m.Tenants[0].VMs[1].Name = "" },
			[]string{"tenants[0].vms[1].name: required",
				`tenants[0].vdc.weights.a1->a2: unknown VM "a1"`,
				`tenants[0].vdc.weights.a1->kv: unknown VM "a1"`}},
		{"duplicate VM across tenants", func(m *model.Model) { m.Tenants[2].VMs[0].Name = "a1" },
			[]string{`tenants[2].vms[0].name: duplicate VM "a1" (also tenants[0].vms[1])`}},
		{"VM tenant", func(m *model.Model) { m.Tenants[1].VMs[0].Tenant = "A" },
			[]string{`tenants[1].vms[0].tenant: "A" is not the tenant that lists the VM ("B")`}},
		{"VM host", func(m *model.Model) { m.Tenants[0].VMs[0].Host = "" },
			[]string{"tenants[0].vms[0].host: required"}},
		{"guarantees", func(m *model.Model) {
			m.Tenants[0].VMs[0].In = -1
			m.Tenants[0].VMs[1].Out = math.NaN()
			m.Tenants[2].VMs[0].In = 1e6
		}, []string{"tenants[0].vms[0].in: must be a non-negative rate in bits/s, got -1",
			"tenants[0].vms[1].out: must be a non-negative rate in bits/s, got NaN",
			"tenants[2].vms[0].in: a best_effort tenant has no guarantees"}},
		{"addresses", func(m *model.Model) {
			m.Tenants[0].VMs[0].Addrs = []netip.Addr{{}}
			m.Tenants[2].VMs[0].Addrs = []netip.Addr{netip.MustParseAddr("fd00::2")}
		}, []string{"tenants[0].vms[0].addrs[0]: not an IP address",
			"tenants[2].vms[0].addrs[0]: fd00::2 is also tenants[1].vms[0].addrs[1]"}},
		{"VDC appliances", func(m *model.Model) {
			v := m.Tenants[0].VDC
			v.Appliances = append(v.Appliances, model.ApplianceGuarantee{Appliance: "fs", Guarantee: 1},
				model.ApplianceGuarantee{Appliance: "kv", Guarantee: 2, Max: 1}, model.ApplianceGuarantee{})
		}, []string{`tenants[0].vdc.appliances[1].appliance: unknown appliance "fs"`,
			`tenants[0].vdc.appliances[2].appliance: duplicate guarantee on appliance "kv" (also tenants[0].vdc.appliances[0])`,
			"tenants[0].vdc.appliances[2].max: 1 is less than the guarantee 2",
			"tenants[0].vdc.appliances[3].appliance: required",
			`tenants[0].vdc.appliances[3].guarantee: required (a positive rate of tokens such as "1600MT/s")`}},
		{"VDC policy and weights", func(m *model.Model) {
			v := m.Tenants[0].VDC
			v.Policy = ""
			v.GlobalWeight = -1
			v.Weights["b1->a1"] = 1
			v.Weights["a1"] = 0
		}, []string{"tenants[0].vdc.policy: required (drf, maxmin or firstfit; ApplyDefaults sets drf)",
			"tenants[0].vdc.global_weight: must be a non-negative number, got -1",
			"tenants[0].vdc.weights.a1: must be a positive number, got 0",
			`tenants[0].vdc.weights.a1: not of the form "src->dst" (a VM of the tenant, then a VM of the tenant or an appliance in its VDC)`,
			`tenants[0].vdc.weights.b1->a1: VM "b1" belongs to tenant "B", not "A"`}},
		{"best-effort VDC", func(m *model.Model) {
			m.Tenants[2].VDC = &model.VDC{Policy: "drf", Appliances: []model.ApplianceGuarantee{{Appliance: "enc", Guarantee: 1}}}
		}, []string{"tenants[2].vdc.appliances[0].guarantee: a best_effort tenant has no guarantees"}},
		{"appliance names", func(m *model.Model) {
			m.Appliances = append(m.Appliances, model.Appliance{Name: "a1", Hypervisor: true, Model: "kv", Parallelism: 1},
				model.Appliance{Name: "kv", Server: "s1", Model: "kv", Parallelism: 1},
				model.Appliance{Hypervisor: true, Model: "kv", Parallelism: 1})
		}, []string{`appliances[2].name: "a1" is also the name of a VM (tenants[0].vms[1])`,
			`appliances[3].name: duplicate appliance "kv" (also appliances[0])`,
			"appliances[4].name: required"}},
		{"appliance server", func(m *model.Model) { m.Appliances[0].Server = ""; m.Appliances[1].Server = "s1" },
			[]string{"appliances[0].server: required (or hypervisor: true)",
				"appliances[1].server: not used by a hypervisor appliance (it runs on the servers of the VMs that use it)"}},
		{"appliance model", func(m *model.Model) {
			m.Appliances[0].Model = "redis"
			m.Appliances[1].Model = ""
			m.Appliances[1].Parallelism = 0
		}, []string{`appliances[0].model: unknown model "redis" (use kv, filestore, encryption or custom)`,
			"appliances[1].model: required (kv, filestore, encryption or custom)",
			"appliances[1].parallelism: must be a positive number, got 0"}},
		{"appliance costs", func(m *model.Model) {
			m.Appliances[1].Model = model.ModelCustom
			m.Appliances[0].Costs = []model.ServiceCost{{Type: "get"}, {Type: "get", Base: -1}}
		}, []string{"appliances[0].costs[0]: base and per_kb are both zero: a request must take some service time",
			`appliances[0].costs[1].type: duplicate type "get" (also appliances[0].costs[0])`,
			"appliances[0].costs[1].base: must not be negative, got -1ns",
			"appliances[1].costs: required for model custom (the service cost of every request type)"}},
		{"virtual cost", func(m *model.Model) {
			m.Appliances[0].VirtualCost = append(m.Appliances[0].VirtualCost,
				model.VirtualCost{Type: "scan", Points: []model.CostPoint{{Size: 10, Tokens: 5}, {Size: 5, Tokens: 1}}},
				model.VirtualCost{Points: []model.CostPoint{{Tokens: 0}}, Step: -1})
		}, []string{`appliances[0].virtual_cost[1].type: unknown type "scan" for appliance "kv" (use get or put)`,
			"appliances[0].virtual_cost[1].points[1].size: 5 is not larger than the previous size 10 (sizes must increase)",
			"appliances[0].virtual_cost[1].points[1].tokens: 1 is less than the previous point's 5: a cost function must not decrease with request size",
			"appliances[0].virtual_cost[2]: duplicate cost function for all types (also appliances[0].virtual_cost[0])",
			"appliances[0].virtual_cost[2].step: must not be negative, got -1",
			"appliances[0].virtual_cost[2].points: every point costs 0 tokens: requests would be free"}},
		{"appliance endpoint", func(m *model.Model) {
			m.Appliances[0].Address, m.Appliances[0].Port, m.Appliances[0].Protocol = "10.0.9.1", 70000, "memcache"
			m.Appliances[1].Address = "10.0.9.2"
			m.Appliances = append(m.Appliances,
				model.Appliance{Name: "fs", Server: "s1", Model: "filestore", Parallelism: 1, Address: "0.0.0.0", Port: 80, Protocol: "http"},
				model.Appliance{Name: "fs2", Server: "s1", Model: "filestore", Parallelism: 1, Address: "fs.example", Port: 80, Protocol: "http"},
				model.Appliance{Name: "fs3", Server: "s1", Model: "filestore", Parallelism: 1, Port: 6379, Protocol: "redis"},
				model.Appliance{Name: "fs4", Server: "s1", Model: "filestore", Parallelism: 1, Address: "fd00::9", Port: 80, Protocol: "http"})
		}, []string{"appliances[0].port: must be 1..65535 with an address, got 70000",
			`appliances[0].protocol: "memcache": use redis or http`,
			"appliances[1].address: a hypervisor appliance has no address of its own",
			"appliances[2].address: 0.0.0.0 is not an address clients can connect to",
			`appliances[3].address: "fs.example" is not an IP address`,
			"appliances[4].address: required with port and protocol (the IP address clients connect to)"}},
		{"capacity", func(m *model.Model) {
			m.Appliances[0].CapacityMin = 5e9
			m.Appliances[1].CapacityMin = -1
			m.Tenants[1].VDC = &model.VDC{Policy: "drf", Appliances: []model.ApplianceGuarantee{{Appliance: "kv", Guarantee: 3e9}}}
		}, []string{"appliances[0].capacity_min: 5000M tokens/s is more than capacity_max 4000M tokens/s",
			"appliances[0]: guarantees sum to 4600M tokens/s, more than capacity_max 4000M tokens/s (tenants A 1600M, B 3000M)",
			"appliances[1].capacity_min: must not be negative, got -1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := base()
			c.mutate(m)
			err := m.Validate()
			got := messages(err)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
			var fe *model.FieldError
			if (err != nil) != (len(c.want) > 0) || err != nil && !errors.As(err, &fe) {
				t.Errorf("error %v", err)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	m := base()
	if v, tn, ok := m.VM("b1"); !ok || v != &m.Tenants[1].VMs[0] || tn != &m.Tenants[1] {
		t.Errorf("VM(b1) = %+v, %+v, %v", v, tn, ok)
	}
	if _, _, ok := m.VM("kv"); ok {
		t.Error("VM(kv) found")
	}
	if tn, ok := m.Tenant("C"); !ok || tn != &m.Tenants[2] {
		t.Errorf("Tenant(C) = %+v, %v", tn, ok)
	}
	if _, ok := m.Tenant("a1"); ok {
		t.Error("Tenant(a1) found")
	}
	if a, ok := m.Appliance("enc"); !ok || a != &m.Appliances[1] {
		t.Errorf("Appliance(enc) = %+v, %v", a, ok)
	}
	if _, ok := m.Appliance("fs"); ok {
		t.Error("Appliance(fs) found")
	}
	if g, ok := m.Tenants[0].VDC.Guarantee("kv"); !ok || g.Guarantee != 1.6e9 {
		t.Errorf("Guarantee(kv) = %+v, %v", g, ok)
	}
	if _, ok := m.Tenants[0].VDC.Guarantee("enc"); ok {
		t.Error("Guarantee(enc) found")
	}
	if _, ok := m.Tenants[1].VDC.Guarantee("kv"); ok {
		t.Error("a nil VDC has a guarantee")
	}
	names := func(vms []model.VM) string {
		var out []string
		for _, v := range vms {
			out = append(out, v.Tenant+"/"+v.Name+"@"+v.Host)
		}
		return strings.Join(out, " ")
	}
	if got := names(m.VMs()); got != "A/a1@s1 A/a2@s2 B/b1@s1 C/c1@s2" {
		t.Errorf("VMs = %s", got)
	}
	for host, want := range map[string]string{"s1": "A/a1@s1 B/b1@s1", "s2": "A/a2@s2 C/c1@s2", "s3": ""} {
		if got := names(m.VMsOn(host)); got != want {
			t.Errorf("VMsOn(%s) = %q; want %q", host, got, want)
		}
	}
	vms := m.VMs()
	vms[0].Host = "s9"
	if m.Tenants[0].VMs[1].Host != "s1" {
		t.Error("VMs shares the VMs with the model")
	}
}

func TestDefaultsAndClone(t *testing.T) {
	m := &model.Model{
		Tenants:    []model.Tenant{{Name: "A", VDC: &model.VDC{}}, {Name: "B"}},
		Appliances: []model.Appliance{{Name: "kv", Model: "kv", VirtualCost: []model.VirtualCost{{Type: "put", Points: []model.CostPoint{{Tokens: 1}}}}}},
	}
	m.ApplyDefaults()
	m.ApplyDefaults()
	a := m.Appliances[0]
	if a.Parallelism != 1 || len(a.VirtualCost) != 2 || !reflect.DeepEqual(a.VirtualCost[1], model.DefaultVirtualCost()) {
		t.Errorf("appliance defaults: %+v", a)
	}
	if m.Tenants[0].VDC.Policy != "drf" || m.Tenants[1].VDC != nil {
		t.Errorf("VDC defaults: %+v, %+v", m.Tenants[0].VDC, m.Tenants[1].VDC)
	}

	m = base()
	c := m.Clone()
	if !reflect.DeepEqual(c, m) {
		t.Fatalf("clone differs:\n%+v\n%+v", c, m)
	}
	c.Tenants[0].VDC.Weights["a1->kv"] = 9
	c.Tenants[0].VDC.Appliances[0].Guarantee = 9
	c.Tenants[1].VMs[0].Addrs[0] = netip.MustParseAddr("10.9.9.9")
	c.Tenants[0].VMs[0].Host = "s9"
	c.Appliances[0].VirtualCost[0].Points[0].Tokens = 9
	if !reflect.DeepEqual(m, base()) {
		t.Error("changing the clone changed the model")
	}
}

// TestEncoding writes a model to JSON and YAML and reads it back, and
// reads quantities with units in both.
func TestEncoding(t *testing.T) {
	m := base()
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"b1","tenant":"B","host":"s1","addrs":["10.0.0.2","fd00::2"],"interface":"veth-b1","in":200000000,"out":500000000`,
		`"vdc":{"appliances":[{"appliance":"kv","guarantee":1600000000}],"policy":"drf","weights":{"a1-\u003ea2":0.5,"a1-\u003ekv":2}}`,
		`"capacity_max":4000000000`, `"virtual_cost":[{"points":[{"size":0,"tokens":8000},{"size":8000,"tokens":8000},{"size":16000,"tokens":16000}]}]`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js)
		}
	}
	var back model.Model
	if err := json.Unmarshal(js, &back); err != nil || !reflect.DeepEqual(&back, m) {
		t.Errorf("JSON round trip: %v\n%+v", err, back)
	}
	ym, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var yback model.Model
	if err := yaml.Unmarshal(ym, &yback); err != nil || !reflect.DeepEqual(&yback, m) {
		t.Errorf("YAML round trip: %v\n%s", err, ym)
	}

	const doc = `{"tenants": [{"name": "A", "vms": [{"name": "a1", "tenant": "A", "host": "s1", "in": 1e9, "addrs": ["10.0.0.1"]}],
		"vdc": {"appliances": [{"appliance": "kv", "guarantee": "1600MT/s"}]}}],
	"appliances": [{"name": "kv", "server": "s2", "model": "kv", "capacity_max": "4GT/s",
		"costs": [{"type": "scan", "base": "10us", "per_kb": 1000}]}]}`
	var d model.Model
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	d.ApplyDefaults()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if g := d.Tenants[0].VDC.Appliances[0].Guarantee; g != 1.6e9 || d.Appliances[0].CapacityMax != 4e9 ||
		d.Appliances[0].Costs[0].Base != units.Duration(10e3) || d.Appliances[0].Costs[0].PerKB != 1000 ||
		d.Tenants[0].VMs[0].Addrs[0] != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("decoded %+v", d)
	}
	if err := json.Unmarshal([]byte(`{"appliances": [{"capacity_max": "4Gbps"}]}`), &d); err == nil ||
		!strings.Contains(err.Error(), `invalid tokens "4Gbps": unknown unit "Gbps"`) {
		t.Errorf("bad tokens: %v", err)
	}
}

func TestOrList(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, "none"}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"}} {
		if got := model.OrList(c.in); got != c.want {
			t.Errorf("OrList(%q) = %q; want %q", c.in, got, c.want)
		}
	}
	p := &model.Problems{File: "m.json"}
	p.Add("tenants[0].name", "required")
	p.Add("", "bad %d", 7)
	if p.Len() != 2 || p.Err().Error() != "m.json: tenants[0].name: required\nm.json: bad 7" {
		t.Errorf("problems: %d, %v", p.Len(), p.Err())
	}
	if (&model.Problems{}).Err() != nil {
		t.Error("no problems, an error")
	}
	fe := &model.FieldError{Line: 3, Msg: "x"}
	if fe.Error() != "line 3: x" {
		t.Errorf("FieldError = %q", fe.Error())
	}
}
