package api

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/getkin/kin-openapi/openapi3"
)

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// TestObjectsMatchSchema: every example object, as the code encodes it,
// is valid under the document's Object schema (which refuses properties
// it does not list).
func TestObjectsMatchSchema(t *testing.T) {
	doc := loadOpenAPI(t)
	schema := doc.Components.Schemas["Object"].Value
	objs := readExamples(t)
	one := 1.0
	objs = append(objs, Object{APIVersion: Version, Kind: KindTenant, Metadata: Meta{Name: "x", ResourceVersion: "7", Generation: 2},
		Spec: &TenantSpec{VMs: []VMSpec{{Name: "x1", Host: "s1"}}, VDC: &model.VDC{Policy: "drf",
			Appliances: []model.ApplianceGuarantee{{Appliance: "kv", Guarantee: 1000}}}},
		Status: &TenantStatus{Achieved: 1, Guarantee: 2, Compliance: &one, VMs: []VMStatus{{Name: "x1", Host: "s1", In: 1, Received: 3}},
			Links: []LinkReservation{{Link: "s1->tor1", Rate: 1}}}})
	kv := model.Appliance{Model: model.ModelKV}
	kv.ApplyDefaults()
	objs = append(objs, Object{APIVersion: Version, Kind: KindAppliance, Metadata: Meta{Name: "kv"}, Spec: &kv},
		Object{APIVersion: Version, Kind: KindHost, Metadata: Meta{Name: "s1"}, Spec: &HostSpec{}, Status: &HostStatus{Connected: true, VMs: 2}})
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if err := schema.VisitJSON(v); err != nil {
			t.Errorf("%s/%s does not match the schema: %v\n%s", o.Kind, o.Name(), err, b)
		}
	}
}

// TestSchemaListsEveryField: the document and the Go types name the same
// fields, both ways, for every type an operator writes.
func TestSchemaListsEveryField(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := doc.Components.Schemas
	prop := func(s *openapi3.Schema, path ...string) *openapi3.Schema {
		for _, p := range path {
			if s.Type.Is("array") {
				s = s.Items.Value
			}
			s = s.Properties[p].Value
		}
		if s.Type.Is("array") {
			s = s.Items.Value
		}
		return s
	}
	tests := []struct {
		schema *openapi3.Schema
		typ    any
	}{
		{schemas["Meta"].Value, Meta{}},
		{schemas["ClusterSpec"].Value, ClusterSpec{}},
		{prop(schemas["ClusterSpec"].Value, "mechanism"), Mechanism{}},
		{schemas["Topology"].Value, spec.Topology{}},
		{prop(schemas["Topology"].Value, "two_tier"), spec.TwoTier{}},
		{prop(schemas["Topology"].Value, "fat_tree"), spec.FatTree{}},
		{prop(schemas["Topology"].Value, "explicit"), spec.Explicit{}},
		{prop(schemas["Topology"].Value, "explicit", "nodes"), spec.Node{}},
		{prop(schemas["Topology"].Value, "explicit", "links"), spec.Link{}},
		{schemas["HostSpec"].Value, HostSpec{}},
		{schemas["TenantSpec"].Value, TenantSpec{}},
		{schemas["VMSpec"].Value, VMSpec{}},
		{prop(schemas["TenantSpec"].Value, "pattern"), model.Pair{}},
		{schemas["VDC"].Value, model.VDC{}},
		{prop(schemas["VDC"].Value, "appliances"), model.ApplianceGuarantee{}},
		{schemas["ApplianceSpec"].Value, ApplianceSpec{}},
		{prop(schemas["ApplianceSpec"].Value, "costs"), model.ServiceCost{}},
		{prop(schemas["ApplianceSpec"].Value, "virtual_cost"), model.VirtualCost{}},
		{prop(schemas["ApplianceSpec"].Value, "virtual_cost", "points"), model.CostPoint{}},
		{schemas["TenantStatus"].Value, TenantStatus{}},
		{prop(schemas["TenantStatus"].Value, "vms"), VMStatus{}},
		{prop(schemas["TenantStatus"].Value, "links"), LinkReservation{}},
		{schemas["HostStatus"].Value, HostStatus{}},
	}
	for _, tt := range tests {
		typ := reflect.TypeOf(tt.typ)
		t.Run(typ.String(), func(t *testing.T) {
			var fields []string
			for f := range typ.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name != "-" && name != "" {
					fields = append(fields, name)
				}
			}
			var props []string
			for p := range tt.schema.Properties {
				props = append(props, p)
			}
			slices.Sort(fields)
			slices.Sort(props)
			if !slices.Equal(fields, props) {
				t.Errorf("Go fields %v, schema properties %v", fields, props)
			}
			if tt.schema.AdditionalProperties.Has == nil || *tt.schema.AdditionalProperties.Has {
				t.Errorf("schema allows properties it does not list (set additionalProperties: false)")
			}
		})
	}
}
