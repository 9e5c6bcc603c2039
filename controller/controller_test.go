package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/bulkhead-dc/bulkhead/units"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

const token = "test-token"

// harness is a controller on a bbolt store behind an HTTP server, with a
// client that checks every request and response against api/openapi.yaml.
type harness struct {
	t   *testing.T
	c   *Controller
	st  *store.Bolt
	srv *httptest.Server
	doc *openapi3.T
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with setup, if not nil, called on the
// controller before it runs.
func newHarnessWith(t *testing.T, setup func(*Controller)) *harness {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := New(Config{Store: st, Elector: st, ID: "http://controller-1", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, func() bool { lead, _ := c.Leading(); return lead })
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, c: c, st: st, srv: srv, doc: doc}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// do sends a request and checks it and its answer against the OpenAPI
// document; it returns the status and body.
func (h *harness) do(method, path string, body any, auth string) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	h.doc.Servers = openapi3.Servers{{URL: h.srv.URL}}
	router, err := gorillamux.NewRouter(h.doc)
	if err != nil {
		h.t.Fatal(err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		h.t.Fatalf("%s %s is not in api/openapi.yaml: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	req.Body = io.NopCloser(bytes.NewReader(raw))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	if reqErr != nil && resp.StatusCode < 400 {
		h.t.Errorf("%s %s: the document refuses the request (%v) but the controller took it", method, path, reqErr)
	}
	rv := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(out))}
	if err := openapi3filter.ValidateResponse(context.Background(), rv); err != nil {
		h.t.Errorf("%s %s: answer %d does not match api/openapi.yaml: %v\n%s", method, path, resp.StatusCode, err, out)
	}
	return resp.StatusCode, out
}

func readFile(t *testing.T, path string) []api.Object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := api.Decode(b, path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func (h *harness) apply(objs []api.Object) (int, api.ApplyResult, api.Problem) {
	h.t.Helper()
	code, body := h.do("POST", "/api/v1/apply", map[string]any{"objects": objs}, token)
	var res api.ApplyResult
	var p api.Problem
	if code == http.StatusOK {
		if err := json.Unmarshal(body, &res); err != nil {
			h.t.Fatalf("%v\n%s", err, body)
		}
	} else if err := json.Unmarshal(body, &p); err != nil {
		h.t.Fatalf("%v\n%s", err, body)
	}
	return code, res, p
}

func (h *harness) stored() []store.Object {
	h.t.Helper()
	recs, _, err := h.st.List(context.Background(), "")
	if err != nil {
		h.t.Fatal(err)
	}
	return recs
}

func actions(res api.ApplyResult) string {
	var s []string
	for _, r := range res.Results {
		s = append(s, r.Kind+"/"+r.Name+"="+string(r.Action))
	}
	return strings.Join(s, " ")
}

func TestApplyGetDelete(t *testing.T) {
	h := newHarness(t)
	cluster := readFile(t, "../docs/examples/cluster.yaml")
	tenants := readFile(t, "../docs/examples/tenants.yaml")

	// Tenants before the cluster: refused, nothing stored.
	code, _, p := h.apply(tenants)
	if code != http.StatusUnprocessableEntity || !strings.Contains(p.Error, "no cluster declared") {
		t.Fatalf("tenants without a cluster: %d %+v", code, p)
	}
	if n := len(h.stored()); n != 0 {
		t.Fatalf("%d objects stored after a refused apply", n)
	}

	code, res, p := h.apply(cluster)
	if code != http.StatusOK {
		t.Fatalf("cluster: %d %+v", code, p)
	}
	if got := actions(res); got != "Cluster/default=created Host/s1=created Host/s2=created Host/s3=created Host/s4=created" {
		t.Errorf("actions %s", got)
	}
	code, res, p = h.apply(tenants)
	if code != http.StatusOK {
		t.Fatalf("tenants: %d %+v", code, p)
	}
	// batch's VMs were placed: the answer and the store carry hosts.
	for _, o := range res.Objects {
		for _, v := range o.Spec.(*api.TenantSpec).VMs {
			if v.Host == "" {
				t.Errorf("%s: VM %s has no host after apply", o.Name(), v.Name)
			}
		}
	}
	// Idempotent: the same files again change nothing.
	rev := res.Revision
	_, res, _ = h.apply(append(cluster, tenants...))
	if strings.Contains(actions(res), "created") || strings.Contains(actions(res), "configured") || res.Revision != rev {
		t.Errorf("re-apply changed something: %s (revision %d → %d)", actions(res), rev, res.Revision)
	}

	// get tenants: both, with status.
	code, body := h.do("GET", "/api/v1/tenants", nil, token)
	var list struct{ Objects []api.Object }
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Objects) != 2 {
		t.Fatalf("get tenants: %d %s", code, body)
	}
	web := list.Objects[1]
	st := web.Status.(*api.TenantStatus)
	if web.Name() != "web" || st.Guarantee != 900e6 || len(st.VMs) != 2 || len(st.Links) == 0 {
		t.Errorf("web's status %+v", st)
	}
	code, body = h.do("GET", "/api/v1/hosts/s1", nil, token)
	if code != http.StatusOK || !strings.Contains(string(body), `"connected": false`) {
		t.Errorf("get host s1: %d %s", code, body)
	}

	// A host with VMs cannot go; a tenant can, then the host can.
	code, body = h.do("DELETE", "/api/v1/hosts/s1", nil, token)
	if code != http.StatusConflict || !strings.Contains(string(body), "runs VM") {
		t.Errorf("delete s1 with VMs: %d %s", code, body)
	}
	if code, body = h.do("DELETE", "/api/v1/tenants/web", nil, token); code != http.StatusOK {
		t.Errorf("delete web: %d %s", code, body)
	}
	if code, _ = h.do("GET", "/api/v1/tenants/web", nil, token); code != http.StatusNotFound {
		t.Errorf("get deleted tenant: %d", code)
	}
	if code, body = h.do("DELETE", "/api/v1/clusters/default", nil, token); code != http.StatusConflict {
		t.Errorf("delete the cluster with objects in it: %d %s", code, body)
	}
}

func TestApplyRefusals(t *testing.T) {
	h := newHarness(t)
	if code, _, p := h.apply(readFile(t, "../docs/examples/cluster.yaml")); code != http.StatusOK {
		t.Fatalf("cluster: %d %+v", code, p)
	}
	before := h.stored()
	tenant := func(name, g string, vms ...api.VMSpec) api.Object {
		return api.Object{APIVersion: api.Version, Kind: api.KindTenant, Metadata: api.Meta{Name: name},
			Spec: &api.TenantSpec{Guarantee: mustRate(t, g), VMs: vms}}
	}
	tests := []struct {
		name string
		objs []api.Object
		code int
		want []string
	}{
		{"guarantees that do not fit a link", []api.Object{
			tenant("big", "700Mbps", api.VMSpec{Name: "b1", Host: "s1"}, api.VMSpec{Name: "b2", Host: "s2"}),
			tenant("big2", "700Mbps", api.VMSpec{Name: "c1", Host: "s1"}, api.VMSpec{Name: "c2", Host: "s3"}),
		}, http.StatusUnprocessableEntity, []string{"admission", "s1", "would carry 1.4 Gbps of 1 Gbps"}},
		{"no room to place", []api.Object{tenant("huge", "10Mbps", manyVMs(33)...)}, // 4 servers × 8 slots
			http.StatusUnprocessableEntity, []string{`Tenant "huge"`, "rejected", "no server slots left"}},
		{"VM on a switch", []api.Object{tenant("t", "1Mbps", api.VMSpec{Name: "t1", Host: "tor1"})},
			http.StatusUnprocessableEntity, []string{"spec.vms[0].host", "tor1"}},
		{"some VMs placed, some not", []api.Object{tenant("t", "1Mbps", api.VMSpec{Name: "t1", Host: "s1"}, api.VMSpec{Name: "t2"})},
			http.StatusUnprocessableEntity, []string{"give every VM a host, or none"}},
		{"unknown mechanism", []api.Object{{APIVersion: api.Version, Kind: api.KindCluster, Metadata: api.Meta{Name: "default"},
			Spec: &api.ClusterSpec{Topology: readFile(t, "../docs/examples/cluster.yaml")[0].Spec.(*api.ClusterSpec).Topology,
				Mechanism: api.Mechanism{Name: "magic"}}}}, http.StatusUnprocessableEntity, []string{"spec.mechanism", "magic"}},
		{"same object twice", []api.Object{tenant("t", "1Mbps", api.VMSpec{Name: "t1", Host: "s1"}), tenant("t", "1Mbps", api.VMSpec{Name: "t1", Host: "s1"})},
			http.StatusUnprocessableEntity, []string{"given twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, p := h.apply(tt.objs)
			if code != tt.code {
				t.Fatalf("status %d, want %d: %+v", code, tt.code, p)
			}
			for _, w := range tt.want {
				if !strings.Contains(p.Error, w) {
					t.Errorf("error %q does not contain %q", p.Error, w)
				}
			}
			if len(p.Problems) == 0 {
				t.Errorf("no located problems in %+v", p)
			}
			after := h.stored()
			if len(after) != len(before) {
				t.Fatalf("store changed: %d objects, was %d", len(after), len(before))
			}
			for i := range after {
				if after[i].Revision != before[i].Revision {
					t.Errorf("%s rewritten", after[i].Key)
				}
			}
		})
	}
}

func TestAPIErrors(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name, method, path string
		body               any
		auth               string
		code               int
	}{
		{"no token", "GET", "/api/v1/tenants", nil, "", http.StatusUnauthorized},
		{"wrong token", "GET", "/api/v1/tenants", nil, "nope", http.StatusUnauthorized},
		{"unknown object", "GET", "/api/v1/tenants/ghost", nil, token, http.StatusNotFound},
		{"delete unknown", "DELETE", "/api/v1/hosts/ghost", nil, token, http.StatusNotFound},
		{"empty apply", "POST", "/api/v1/apply", map[string]any{"objects": []any{}}, token, http.StatusUnprocessableEntity},
		{"malformed object", "POST", "/api/v1/apply", map[string]any{"objects": []any{map[string]any{"apiVersion": api.Version, "kind": "Host",
			"metadata": map[string]any{"name": "s1"}, "spec": map[string]any{"adress": "10.0.0.1"}}}}, token, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := h.do(tt.method, tt.path, tt.body, tt.auth); code != tt.code {
				t.Errorf("status %d, want %d: %s", code, tt.code, body)
			}
		})
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := h.do("GET", p, nil, ""); code != http.StatusOK {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
}

// TestFollowerRefusesWrites: a controller that does not lead answers
// reads and sends writers to the leader.
func TestFollowerRefusesWrites(t *testing.T) {
	h := newHarness(t)
	if code, _, p := h.apply(readFile(t, "../docs/examples/cluster.yaml")); code != http.StatusOK {
		t.Fatalf("cluster: %d %+v", code, p)
	}
	f, err := New(Config{Store: h.st, Elector: h.st, ID: "http://follower", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	f.setReady(nil)
	f.mu.Lock()
	f.leader = "http://controller-1"
	f.mu.Unlock()
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	h2 := *h
	h2.srv = srv
	code, body := h2.do("POST", "/api/v1/apply", map[string]any{"objects": readFile(t, "../docs/examples/tenants.yaml")}, token)
	if code != http.StatusMisdirectedRequest || !strings.Contains(string(body), "http://controller-1") {
		t.Errorf("write to a follower: %d %s", code, body)
	}
	if code, body := h2.do("GET", "/api/v1/hosts", nil, token); code != http.StatusOK || !strings.Contains(string(body), `"s4"`) {
		t.Errorf("read from a follower: %d %s", code, body)
	}
}

func mustRate(t *testing.T, s string) (r unitsRate) {
	t.Helper()
	if err := r.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
		t.Fatal(err)
	}
	return r
}

type unitsRate = units.Rate

func manyVMs(n int) []api.VMSpec {
	vms := make([]api.VMSpec, n)
	for i := range vms {
		vms[i].Name = "vm" + strconv.Itoa(i)
	}
	return vms
}
