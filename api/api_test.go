package api

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/model"
	"gopkg.in/yaml.v3"
)

func readExamples(t *testing.T) []Object {
	t.Helper()
	var all []Object
	for _, f := range []string{"../docs/examples/cluster.yaml", "../docs/examples/tenants.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := Decode(b, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, objs...)
	}
	return all
}

func TestDecodeExamples(t *testing.T) {
	objs := readExamples(t)
	var got []string
	for _, o := range objs {
		got = append(got, o.Kind+"/"+o.Name())
	}
	want := []string{"Cluster/default", "Host/s1", "Host/s2", "Host/s3", "Host/s4", "Tenant/web", "Tenant/batch"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	web := objs[5].Spec.(*TenantSpec)
	if in, out := web.Hose(&web.VMs[0]); in != 450e6 || out != 450e6 {
		t.Errorf("web-1 hose %g/%g, want 450 Mbps both ways", in, out)
	}
	if got := objs[6].Spec.(*TenantSpec).Unplaced(); len(got) != 3 {
		t.Errorf("batch unplaced %v, want 3 VMs", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	const cluster = "apiVersion: bulkhead.dev/v1\nkind: Cluster\nmetadata: {name: default}\nspec:\n  topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 2, edge: 1Gbps}}\n"
	tests := []struct {
		name, doc string
		want      []string // every one must appear in the error
	}{
		{"unknown field with line and path", "apiVersion: bulkhead.dev/v1\nkind: Tenant\nmetadata: {name: a}\nspec:\n  vms:\n    - {name: a1, gaurantee: 1Gbps}\n",
			[]string{"f.yaml:6:", "spec.vms[0]", `unknown field "gaurantee"`}},
		{"unknown kind", "apiVersion: bulkhead.dev/v1\nkind: Tennant\nmetadata: {name: a}\nspec: {}\n",
			[]string{"f.yaml:2:", "kind", `unknown kind "Tennant"`, "Tenant"}},
		{"missing kind", "apiVersion: bulkhead.dev/v1\nmetadata: {name: a}\nspec: {}\n", []string{"kind: required"}},
		{"other version", "apiVersion: v2\nkind: Host\nmetadata: {name: s1}\nspec: {address: 10.0.0.1}\n",
			[]string{"apiVersion", `unknown version "v2"`, Version}},
		{"bad name", "apiVersion: bulkhead.dev/v1\nkind: Host\nmetadata: {name: 's 1'}\nspec: {address: 10.0.0.1}\n",
			[]string{"metadata.name", "not a valid name"}},
		{"no spec", "apiVersion: bulkhead.dev/v1\nkind: Host\nmetadata: {name: s1}\n", []string{"spec: required"}},
		{"bad rate", "apiVersion: bulkhead.dev/v1\nkind: Tenant\nmetadata: {name: a}\nspec:\n  guarantee: 1Gbs\n  vms: [{name: a1}]\n",
			[]string{"f.yaml:5:", "spec.guarantee", "Gbs"}},
		{"bad address", "apiVersion: bulkhead.dev/v1\nkind: Host\nmetadata: {name: s1}\nspec: {address: 10.0.0.300}\n",
			[]string{"f.yaml:4:", "spec.address", "10.0.0.300"}},
		{"cluster not named default", strings.Replace(cluster, "default", "prod", 1), []string{"metadata.name", `"default"`}},
		{"not YAML", "kind: [\n", []string{"f.yaml"}},
		{"empty", "", []string{"no objects"}},
		{"second document broken", cluster + "---\napiVersion: bulkhead.dev/v1\nkind: Host\nmetadata: {name: s1}\nspec: {adress: 10.0.0.1}\n",
			[]string{"f.yaml:10:", `unknown field "adress"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Decode([]byte(tt.doc), "f.yaml")
			if err == nil {
				t.Fatalf("no error; objects %+v", objs)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDecodeLimits(t *testing.T) {
	doc := "apiVersion: bulkhead.dev/v1\nkind: Host\nmetadata: {name: s1}\nspec: {address: 10.0.0.1}\n"
	many := strings.Repeat(doc+"---\n", MaxObjects+1)
	if _, err := Decode([]byte(many), "f.yaml"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("%d objects: error %v, want a limit", MaxObjects+1, err)
	}
	big := make([]byte, MaxBytes+1)
	if _, err := Decode(big, "f.yaml"); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("%d bytes: error %v, want a limit", len(big), err)
	}
}

// TestJSONRoundTrip: what the CLI sends (JSON) decodes to what it read
// from YAML, and `get -o yaml` output applies again.
func TestJSONRoundTrip(t *testing.T) {
	for _, o := range readExamples(t) {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var back Object
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s/%s: %v\n%s", o.Kind, o.Name(), err, b)
		}
		if !reflect.DeepEqual(back, o) {
			t.Errorf("%s/%s: round trip changed it:\n%+v\n%+v", o.Kind, o.Name(), back.Spec, o.Spec)
		}
		y, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(y, "get.yaml")
		if err != nil {
			t.Fatalf("%s/%s: get -o yaml output does not apply: %v\n%s", o.Kind, o.Name(), err, y)
		}
		if !reflect.DeepEqual(again[0].Spec, o.Spec) {
			t.Errorf("%s/%s: YAML round trip changed the spec:\n%s", o.Kind, o.Name(), y)
		}
	}
}

func TestJSONErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown spec field", `{"apiVersion":"bulkhead.dev/v1","kind":"Host","metadata":{"name":"s1"},"spec":{"adress":"10.0.0.1"}}`, `spec: unknown field "adress"`},
		{"wrong type", `{"apiVersion":"bulkhead.dev/v1","kind":"Cluster","metadata":{"name":"default"},"spec":{"slots":"many"}}`, "spec.slots: expected int"},
		{"unknown top field", `{"apiVersion":"bulkhead.dev/v1","kind":"Host","metadata":{"name":"s1"},"spec":{},"extra":1}`, `unknown field "extra"`},
		{"no spec", `{"apiVersion":"bulkhead.dev/v1","kind":"Host","metadata":{"name":"s1"}}`, "spec: required"},
		{"status on a cluster", `{"apiVersion":"bulkhead.dev/v1","kind":"Cluster","metadata":{"name":"default"},"spec":{},"status":{}}`, "has no status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o Object
			err := json.Unmarshal([]byte(tt.body), &o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	objs := readExamples(t)
	c, err := Build(objs)
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.Slots != 8 || c.Spec.Placement != PlacementOktopus || c.Spec.Mechanism.Name != "elasticswitch" {
		t.Errorf("cluster spec %+v", c.Spec)
	}
	if len(c.Hosts) != 4 || c.Hosts["s1"].Port != DefaultAgentPort {
		t.Errorf("hosts %+v", c.Hosts)
	}
	// batch is unplaced: only web's VMs are in the model.
	if n := len(c.Model.VMs()); n != 2 {
		t.Errorf("model has %d VMs, want web's 2", n)
	}
	if len(c.Model.Hosts) != 4 || c.Model.Hosts[0].Link != 1e9 {
		t.Errorf("model hosts %+v", c.Model.Hosts)
	}
}

func TestBuildErrors(t *testing.T) {
	base := readExamples(t)
	edit := func(f func([]Object) []Object) []Object {
		objs := make([]Object, len(base))
		for i, o := range base {
			objs[i] = o
			switch s := o.Spec.(type) {
			case *TenantSpec:
				c := *s
				c.VMs = append([]VMSpec(nil), s.VMs...)
				objs[i].Spec = &c
			case *HostSpec:
				c := *s
				objs[i].Spec = &c
			case *ClusterSpec:
				c := *s
				objs[i].Spec = &c
			}
		}
		return f(objs)
	}
	tests := []struct {
		name string
		objs []Object
		want []string
	}{
		{"no cluster", edit(func(o []Object) []Object { return o[1:] }), []string{"no cluster declared"}},
		{"host not a server", edit(func(o []Object) []Object {
			o[1].Metadata.Name = "s9"
			return o
		}), []string{`Host "s9"`, "metadata.name", "not a server"}},
		{"VM on an unknown server", edit(func(o []Object) []Object {
			o[5].Spec.(*TenantSpec).VMs[1].Host = "tor1"
			return o
		}), []string{`Tenant "web"`, "spec.vms[1].host", `"tor1" is not a server`}},
		{"VM name used twice", edit(func(o []Object) []Object {
			ts := o[6].Spec.(*TenantSpec)
			ts.VMs[0] = VMSpec{Name: "web-1", Host: "s3"}
			return o
		}), []string{`Tenant "batch"`, `Tenant "web"`, "web-1"}},
		{"declared twice", edit(func(o []Object) []Object { return append(o, o[1]) }), []string{`Host "s1"`, "declared twice"}},
		{"bad placement", edit(func(o []Object) []Object {
			o[0].Spec.(*ClusterSpec).Placement = "random"
			return o
		}), []string{`Cluster "default"`, "spec.placement", `"random"`}},
		{"bad topology", edit(func(o []Object) []Object {
			o[0].Spec.(*ClusterSpec).Topology.Kind = "ring"
			return o
		}), []string{"spec.topology.kind", `"ring"`}},
		{"negative guarantee", edit(func(o []Object) []Object {
			o[5].Spec.(*TenantSpec).VMs[0].In = -1
			return o
		}), []string{"spec.vms[0].in", "non-negative"}},
		{"no VMs", edit(func(o []Object) []Object {
			o[6].Spec.(*TenantSpec).VMs = nil
			return o
		}), []string{`Tenant "batch"`, "spec.vms", "at least one VM"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.objs)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if len(model.FieldErrors(err)) == 0 {
				t.Errorf("error %v carries no FieldError", err)
			}
		})
	}
}
