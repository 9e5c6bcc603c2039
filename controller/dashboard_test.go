package controller

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
	"github.com/bulkhead-dc/bulkhead/units"
	"github.com/bulkhead-dc/bulkhead/webui"
	"github.com/getkin/kin-openapi/openapi3"
)

// dashboardCluster: two racks of two servers (1 Gbps links, a 1 Gbps
// core), a kv appliance behind s4, tenant a (a1 on s1 sends to a3 on s3,
// across the core; 300 Mbps) with a VDC on kv, tenant b (b2 on s2,
// 100 Mbps).
func dashboardCluster() []api.Object {
	o := func(kind, name string, s any) api.Object {
		return api.Object{APIVersion: api.Version, Kind: kind, Metadata: api.Meta{Name: name}, Spec: s}
	}
	objs := []api.Object{o(api.KindCluster, api.ClusterName, &api.ClusterSpec{
		Topology:  spec.Topology{Kind: "two-tier", TwoTier: &spec.TwoTier{Racks: 2, ServersPerRack: 2, Edge: spec.Rate(1e9), Core: spec.Rate(1e9)}},
		Slots:     4,
		Mechanism: api.Mechanism{Name: "elasticswitch"},
	})}
	for i, h := range []string{"s1", "s2", "s3", "s4"} {
		objs = append(objs, o(api.KindHost, h, &api.HostSpec{Address: netip.AddrFrom4([4]byte{10, 9, 0, byte(i + 1)})}))
	}
	return append(objs,
		o(api.KindAppliance, "kv", &api.ApplianceSpec{Server: "s4", Model: "kv"}),
		o(api.KindTenant, "a", &api.TenantSpec{Guarantee: units.Rate(3e8),
			VDC: &model.VDC{Appliances: []model.ApplianceGuarantee{{Appliance: "kv", Guarantee: 1e6}}},
			VMs: []api.VMSpec{{Name: "a1", Host: "s1"}, {Name: "a3", Host: "s3"}}}),
		o(api.KindTenant, "b", &api.TenantSpec{Guarantee: units.Rate(1e8), VMs: []api.VMSpec{{Name: "b2", Host: "s2"}}}))
}

// TestDashboard: the web UI's snapshot of a leader from its agents'
// reports — tenants' rates and guarantees, access links from the VMs'
// counters, the core from the reported pairs on their admitted routes,
// reservations, appliance use by tenant, agents — served under the same
// auth as the operator API and as api/openapi.yaml describes it.
func TestDashboard(t *testing.T) {
	h := newHarness(t)
	if code, _, p := h.apply(dashboardCluster()); code != http.StatusOK {
		t.Fatalf("apply: %d %+v", code, p)
	}
	c := h.c
	nlinks := 0
	if _, cl, err := c.cluster(context.Background()); err != nil {
		t.Fatal(err)
	} else {
		nlinks = len(cl.Topology.Links)
	}
	reports := map[string]*controlpb.Report{
		"s1": {Vms: []*controlpb.VMRates{{Vm: "a1", Received: 0, Sent: 250e6}},
			Pairs: []*controlpb.PairRates{{Src: "a1", Dst: "a3", Rate: 240e6}},
			Flows: []*controlpb.FlowObs{{Src: "a1", Dst: "kv", Path: []uint32{uint32(nlinks)<<2 | uint32(mech.Appliance)}, Used: []float32{3e5}}},
			Stats: &controlpb.AgentStats{Steps: 7, StepSeconds: 0.002, Dropped: map[string]uint64{"auth": 2}}},
		"s3": {Vms: []*controlpb.VMRates{{Vm: "a3", Received: 240e6, Sent: 1e6}}},
		"s2": {Vms: []*controlpb.VMRates{{Vm: "b2", Received: 90e6, Sent: 0}}},
	}
	for host, r := range reports {
		if err := reportAs(t, c, host, r); err != nil {
			t.Fatal(err)
		}
	}
	// The routes answer the latest snapshot of the UI's loop: take one.
	if err := c.ui.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, body := h.do("GET", "/ui/api/snapshot?tenant=a", nil, token)
	if code != http.StatusOK {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	var snap webui.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatal(err)
	}
	if !snap.Controller.Leading || snap.Controller.Mechanism != "elasticswitch" {
		t.Errorf("controller %+v", snap.Controller)
	}
	tenants := map[string]webui.Tenant{}
	for _, tn := range snap.Tenants {
		tenants[tn.Name] = tn
	}
	a, b := tenants["a"], tenants["b"]
	if a.Guarantee != 6e8 || a.Achieved == nil || *a.Achieved != 240e6 || len(a.VMs) != 2 || b.Achieved == nil || *b.Achieved != 90e6 || len(b.VMs) != 0 {
		t.Errorf("tenants: a %+v, b %+v", a, b)
	}
	if len(a.VDC) != 1 || a.VDC[0].Used == nil || *a.VDC[0].Used != 3e5 {
		t.Errorf("a's VDC: %+v", a.VDC)
	}
	links := map[string]webui.Link{}
	for _, l := range snap.Links {
		links[l.Name] = l
	}
	used := func(name string) float64 {
		l, ok := links[name]
		if !ok || l.Used == nil {
			t.Errorf("link %s: %+v, no rate", name, l)
			return -1
		}
		return *l.Used
	}
	if u := used("s1->tor1"); u != 250e6 || links["s1->tor1"].Source != "vms" {
		t.Errorf("s1's uplink: %v (%s), want 250e6 from the VMs' counters", u, links["s1->tor1"].Source)
	}
	if u := used("tor2->s3"); u != 240e6 {
		t.Errorf("s3's downlink: %v, want 240e6", u)
	}
	var core []string
	for _, l := range snap.Links {
		if l.Source == "pairs" && *l.Used == 240e6 {
			core = append(core, l.Name)
		}
	}
	if len(core) != 2 {
		t.Errorf("the links between switches carrying a1->a3's 240 Mbps: %v, want tor1's uplink and the core's link to tor2", core)
	}
	if r := links["s1->tor1"]; r.Reserved != 3e8 || len(r.Reservations) != 1 || r.Reservations[0].Tenant != "a" {
		t.Errorf("s1's uplink reservations: %+v", r)
	}
	if len(snap.Links) == 0 {
		t.Fatal("no links")
	}
	if snap.Links[0].Name != "s1->tor1" && snap.Links[0].Name != "tor2->s3" && !slices.Contains(core, snap.Links[0].Name) {
		t.Errorf("links not the most utilized first: %s first", snap.Links[0].Name)
	}
	if len(snap.Appliances) != 1 || snap.Appliances[0].Throughput == nil || *snap.Appliances[0].Throughput != 3e5 ||
		snap.Appliances[0].Estimate != nil || len(snap.Appliances[0].Tenants) != 1 {
		t.Errorf("appliances: %+v", snap.Appliances)
	}
	var s1 *webui.Agent
	for i := range snap.Agents {
		if snap.Agents[i].Host == "s1" {
			s1 = &snap.Agents[i]
		}
	}
	if len(snap.Agents) != 4 || s1 == nil || s1.LastReport == nil || s1.Steps != 7 || s1.Dropped["auth"] != 2 || s1.VMs != 1 {
		t.Errorf("agents: %+v", snap.Agents)
	}
	if code, body := h.do("GET", "/ui/api/history?tenant=a", nil, token); code != http.StatusOK || !strings.Contains(string(body), `"a3"`) {
		t.Errorf("history: %d %s", code, body)
	}
	if code, _ := h.do("GET", "/ui/api/snapshot", nil, ""); code != http.StatusUnauthorized {
		t.Errorf("snapshot without the token: %d", code)
	}
	if code, _ := h.do("GET", "/ui/api/history", nil, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("history with a wrong token: %d", code)
	}
}

// TestDashboardLogin: the login form takes the operator token and sets
// the session cookie; the UI's routes accept it, the operator API does
// not; a wrong token sets none.
func TestDashboardLogin(t *testing.T) {
	h := newHarness(t)
	cl := h.srv.Client()
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	post := func(tok string) *http.Response {
		t.Helper()
		resp, err := cl.PostForm(h.srv.URL+"/ui/login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("wrong"); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("wrong token: %d %v", resp.StatusCode, resp.Cookies())
	}
	resp := post(token)
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || cookies[0].Name != webui.CookieName || !cookies[0].HttpOnly ||
		cookies[0].SameSite != http.SameSiteStrictMode || strings.Contains(cookies[0].Value, token) {
		t.Fatalf("login: %d %v", resp.StatusCode, cookies)
	}
	get := func(path string, ck *http.Cookie) (int, string) {
		req, _ := http.NewRequest("GET", h.srv.URL+path, nil)
		if ck != nil {
			req.AddCookie(ck)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path   string
		cookie bool
		want   int
		body   string
	}{
		{"/ui/", false, 200, `name="token"`},
		{"/ui/", true, 200, "static/app.js"},
		{"/ui/api/snapshot", false, 401, "unauthorized"},
		{"/ui/api/snapshot", true, 200, `"tenants"`},
		{"/api/v1/tenants", true, 401, "unauthorized"},
	} {
		var ck *http.Cookie
		if tc.cookie {
			ck = cookies[0]
		}
		if code, body := get(tc.path, ck); code != tc.want || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s (cookie %v): %d, want %d with %q\n%.300s", tc.path, tc.cookie, code, tc.want, tc.body, body)
		}
	}
}

// TestDashboardFollower: a follower's snapshot names the leader and shows
// no rates (it has no reports), not zeros.
func TestDashboardFollower(t *testing.T) {
	h := newHarness(t)
	if code, _, p := h.apply(dashboardCluster()); code != http.StatusOK {
		t.Fatalf("apply: %d %+v", code, p)
	}
	f, err := New(Config{Store: h.st, Elector: h.st, ID: "http://follower", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.leader = "http://controller-1"
	f.mu.Unlock()
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	h2 := *h
	h2.srv = srv
	if err := f.ui.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, body := h2.do("GET", "/ui/api/snapshot?tenant=a", nil, token)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var snap webui.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Controller.Leading || snap.Controller.Leader != "http://controller-1" || len(snap.Tenants) != 2 {
		t.Fatalf("follower's snapshot: %+v", snap.Controller)
	}
	for _, tn := range snap.Tenants {
		if tn.Achieved != nil || tn.Compliance != nil || tn.Guarantee == 0 {
			t.Errorf("follower's tenant %+v: want its guarantee and no rates", tn)
		}
	}
	for _, a := range snap.Agents {
		if a.Connected || a.LastReport != nil {
			t.Errorf("follower's agent %+v", a)
		}
	}
}

// TestDashboardSchema: api/openapi.yaml's UI schemas and the webui types
// name the same fields, both ways.
func TestDashboardSchema(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	sch := doc.Components.Schemas
	item := func(s *openapi3.Schema, p string) *openapi3.Schema {
		s = s.Properties[p].Value
		if s.Type.Is("array") {
			s = s.Items.Value
		}
		return s
	}
	for _, tc := range []struct {
		schema *openapi3.Schema
		typ    any
	}{
		{sch["UISnapshot"].Value, webui.Snapshot{}},
		{sch["UIController"].Value, webui.Controller{}},
		{item(sch["UIController"].Value, "central"), webui.Central{}},
		{sch["UITenant"].Value, webui.Tenant{}},
		{item(sch["UITenant"].Value, "vms"), webui.VM{}},
		{item(sch["UITenant"].Value, "vdc"), webui.VDCGuarantee{}},
		{sch["UILink"].Value, webui.Link{}},
		{item(sch["UILink"].Value, "reservations"), webui.Reservation{}},
		{sch["UIAppliance"].Value, webui.Appliance{}},
		{item(sch["UIAppliance"].Value, "tenants"), webui.ApplianceTenant{}},
		{sch["UIAgent"].Value, webui.Agent{}},
		{sch["UIHistory"].Value, webui.History{}},
	} {
		typ := reflect.TypeOf(tc.typ)
		t.Run(typ.String(), func(t *testing.T) {
			var fields, props []string
			for f := range typ.Fields() {
				if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
					fields = append(fields, name)
				}
			}
			for p := range tc.schema.Properties {
				props = append(props, p)
			}
			slices.Sort(fields)
			slices.Sort(props)
			if !slices.Equal(fields, props) {
				t.Errorf("Go fields %v, schema properties %v", fields, props)
			}
		})
	}
}
