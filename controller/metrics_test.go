package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/controlpb"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/prometheus/client_golang/prometheus"
)

// rulesFile is where the alerting rules that use the metrics live.
const rulesFile = "../deploy/prometheus/bulkhead-rules.yaml"

// clusterMetricLabels are the per-object metrics of the leader
// (clusterCollector) and their labels, as deploy/prometheus's rules use
// them.
var clusterMetricLabels = map[string][]string{
	"bulkhead_controller_tenant_guarantee_bps":                {"tenant"},
	"bulkhead_controller_tenant_achieved_bps":                 {"tenant"},
	"bulkhead_controller_tenant_below_guarantee":              {"tenant"},
	"bulkhead_controller_tenant_intervals_total":              {"tenant"},
	"bulkhead_controller_tenant_compliant_intervals_total":    {"tenant"},
	"bulkhead_controller_agent_connected":                     {"host"},
	"bulkhead_controller_agent_last_report_timestamp_seconds": {"host"},
	"bulkhead_controller_agent_limit_failures_total":          {"host"},
	"bulkhead_controller_appliance_capacity_estimate":         {"appliance"},
}

// sample is one gathered series.
type sample struct {
	labels map[string]string
	value  float64
}

// gather scrapes a registry: every series by metric name.
func gather(t *testing.T, g prometheus.Gatherer) map[string][]sample {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string][]sample{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetGauge() != nil:
				s.value = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				s.value = m.GetCounter().GetValue()
			}
			out[mf.GetName()] = append(out[mf.GetName()], s)
		}
	}
	return out
}

// value is the series of name whose label key is val, if any.
func value(ms map[string][]sample, name, key, val string) (float64, bool) {
	for _, s := range ms[name] {
		if s.labels[key] == val {
			return s.value, true
		}
	}
	return 0, false
}

// checkLabels checks that every gathered series of the cluster metrics
// has exactly the labels the rules expect, and records the names seen.
func checkLabels(t *testing.T, ms map[string][]sample, seen map[string]bool) {
	t.Helper()
	for name := range ms {
		seen[name] = true
	}
	for name, want := range clusterMetricLabels {
		for _, s := range ms[name] {
			var got []string
			for k := range s.labels {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s has labels %v, the rules expect %v", name, got, want)
			}
		}
	}
}

// TestClusterMetrics scrapes a running controller's registry: the leader
// exports each declared tenant's guarantee, achieved rate and compliance
// judgement, each declared host's agent (session, last report, limiter
// failures) and, running Pulsar, each appliance's capacity estimate, with
// the names and labels deploy/prometheus/bulkhead-rules.yaml uses; a
// deleted tenant's series go, and a controller that does not lead
// exports none.
func TestClusterMetrics(t *testing.T) {
	seen := map[string]bool{}

	t.Run("tenants and hosts", func(t *testing.T) {
		h := newHarness(t)
		for _, f := range []string{"../docs/examples/cluster.yaml", "../docs/examples/tenants.yaml"} {
			if code, _, p := h.apply(readFile(t, f)); code != 200 {
				t.Fatalf("%s: %d %+v", f, code, p)
			}
		}
		c := h.c
		// web-1 on s1 receives 100 Mbps of its 450 Mbps while the limiter
		// of web-2 (on s2) toward it holds it back: below its guarantee,
		// by the compliance rule. Reported until a compliance interval has
		// judged it (each interval forgets the limiters of the reports
		// before it).
		report := func() {
			t.Helper()
			r := &controlpb.Report{
				Vms:   []*controlpb.VMRates{{Vm: "web-1", Received: 100e6, Sent: 1e6}},
				Stats: &controlpb.AgentStats{Steps: 10, LimitFailures: 3},
			}
			if err := reportAs(t, c, "s1", r); err != nil {
				t.Fatal(err)
			}
			r = &controlpb.Report{Pairs: []*controlpb.PairRates{{Src: "web-2", Dst: "web-1", Rate: 100e6, Limit: 100e6, Bound: true}}}
			if err := reportAs(t, c, "s2", r); err != nil {
				t.Fatal(err)
			}
		}
		var ms map[string][]sample
		deadline := time.Now().Add(5 * time.Second)
		for {
			report()
			ms = gather(t, c.reg)
			if v, ok := value(ms, "bulkhead_controller_tenant_below_guarantee", "tenant", "web"); ok && v == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("web not judged below its guarantee within 5 s: %v", ms["bulkhead_controller_tenant_below_guarantee"])
			}
			time.Sleep(50 * time.Millisecond)
		}
		checkLabels(t, ms, seen)
		want := []struct {
			name, key, val string
			v              float64
		}{
			{"bulkhead_controller_tenant_guarantee_bps", "tenant", "web", 900e6},
			{"bulkhead_controller_tenant_guarantee_bps", "tenant", "batch", 600e6},
			{"bulkhead_controller_tenant_achieved_bps", "tenant", "web", 100e6},
			{"bulkhead_controller_agent_connected", "host", "s1", 0},
			{"bulkhead_controller_agent_connected", "host", "s4", 0},
			{"bulkhead_controller_agent_limit_failures_total", "host", "s1", 3},
		}
		for _, w := range want {
			if v, ok := value(ms, w.name, w.key, w.val); !ok || v != w.v {
				t.Errorf("%s{%s=%q} = %v (present %v), want %v", w.name, w.key, w.val, v, ok, w.v)
			}
		}
		if v, ok := value(ms, "bulkhead_controller_tenant_intervals_total", "tenant", "web"); !ok || v < 1 {
			t.Errorf("web's compliance intervals: %v (present %v), want ≥ 1", v, ok)
		}
		if v, ok := value(ms, "bulkhead_controller_tenant_compliant_intervals_total", "tenant", "web"); !ok {
			t.Errorf("web's compliant intervals absent (%v)", v)
		}
		if v, ok := value(ms, "bulkhead_controller_agent_last_report_timestamp_seconds", "host", "s1"); !ok || time.Since(time.Unix(0, int64(v*1e9))).Abs() > time.Minute {
			t.Errorf("s1's last report at %v (present %v), want about now", v, ok)
		}
		if _, ok := value(ms, "bulkhead_controller_agent_last_report_timestamp_seconds", "host", "s3"); ok {
			t.Error("s3 never reported, yet has a last report")
		}
		// batch has no fresh report: a guarantee, no judgement.
		if _, ok := value(ms, "bulkhead_controller_tenant_below_guarantee", "tenant", "batch"); ok {
			t.Error("batch has no report, yet is judged")
		}

		// web gets its guarantee: judged not below.
		waitFor(t, func() bool {
			if err := reportAs(t, c, "s1", &controlpb.Report{Vms: []*controlpb.VMRates{{Vm: "web-1", Received: 440e6}}}); err != nil {
				t.Fatal(err)
			}
			v, ok := value(gather(t, c.reg), "bulkhead_controller_tenant_below_guarantee", "tenant", "web")
			return ok && v == 0
		})

		// A deleted tenant's series go with the next compliance interval.
		if _, err := c.Delete(context.Background(), api.KindTenant, "web"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			ms := gather(t, c.reg)
			for name, labels := range clusterMetricLabels {
				if labels[0] != "tenant" {
					continue
				}
				if _, ok := value(ms, name, "tenant", "web"); ok {
					return false
				}
			}
			_, batch := value(ms, "bulkhead_controller_tenant_guarantee_bps", "tenant", "batch")
			return batch
		})
	})

	t.Run("appliances", func(t *testing.T) {
		fs := fleetSpec{racks: 1, perRack: 2, vmsPerHost: 2, tenantSizes: []int{2}, appliances: 1, peers: 1, appEvery: 1,
			interval: 100 * time.Millisecond}
		f := startFleet(t, fs)
		var ms map[string][]sample
		deadline := time.Now().Add(10 * time.Second)
		for {
			ms = gather(t, f.c.reg)
			v, ok := value(ms, "bulkhead_controller_appliance_capacity_estimate", "appliance", "kv0")
			c1, _ := value(ms, "bulkhead_controller_agent_connected", "host", "s1")
			if ok && v > 0 && c1 == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no capacity estimate of kv0 or s1 not connected within 10 s: %v %v", ms["bulkhead_controller_appliance_capacity_estimate"], ms["bulkhead_controller_agent_connected"])
			}
			time.Sleep(50 * time.Millisecond)
		}
		checkLabels(t, ms, seen)
	})

	t.Run("follower", func(t *testing.T) {
		st, err := store.OpenBolt(filepath.Join(t.TempDir(), "state.db"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		c, err := New(Config{Store: st, Elector: st, ID: "http://controller-2", Token: token})
		if err != nil {
			t.Fatal(err)
		}
		// Not running: not leading. Whatever it holds, it exports none.
		c.rt.view = map[string]tenantView{"web": {guarantee: 1, counted: true}}
		c.rt.declared = []string{"s1"}
		ms := gather(t, c.reg)
		for name := range clusterMetricLabels {
			if len(ms[name]) > 0 {
				t.Errorf("a controller that does not lead exports %s: %v", name, ms[name])
			}
		}
	})

	// Every controller metric the rules use is exported, with its labels.
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`bulkhead_controller_[a-z_]+`).FindAllString(string(b), -1)
	if len(used) == 0 {
		t.Fatalf("%s uses no bulkhead_controller_ metric", rulesFile)
	}
	for _, name := range used {
		if !seen[name] {
			t.Errorf("%s uses %s, which the running controller did not export", rulesFile, name)
		}
	}
}

// TestMetricsAuth: /metrics, which shows every tenant's rates, is served
// as the host agent serves its own: to a request over loopback with no
// credentials, to any other only with the operator's (the token, or an
// operator client certificate); /healthz needs none.
func TestMetricsAuth(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := New(Config{Store: st, Elector: st, ID: "http://controller-1", Token: token,
		Authn: func(r *RequestInfo) bool { return r.TLS != nil && len(r.TLS.VerifiedChains) > 0 }})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	verified := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}
	for _, tc := range []struct {
		name, path, from, bearer string
		tls                      *tls.ConnectionState
		want                     int
	}{
		{name: "loopback", path: "/metrics", from: "127.0.0.1:40000", want: http.StatusOK},
		{name: "loopback, IPv6", path: "/metrics", from: "[::1]:40000", want: http.StatusOK},
		{name: "loopback, IPv4-mapped", path: "/metrics", from: "[::ffff:127.0.0.1]:40000", want: http.StatusOK},
		{name: "another host", path: "/metrics", from: "10.0.0.5:40000", want: http.StatusUnauthorized},
		{name: "another host, IPv6", path: "/metrics", from: "[fd00::5]:40000", want: http.StatusUnauthorized},
		{name: "another host, a wrong token", path: "/metrics", from: "10.0.0.5:40000", bearer: "wrong", want: http.StatusUnauthorized},
		{name: "another host, TLS without a client certificate", path: "/metrics", from: "10.0.0.5:40000", tls: &tls.ConnectionState{}, want: http.StatusUnauthorized},
		{name: "another host, the operator token", path: "/metrics", from: "10.0.0.5:40000", bearer: token, want: http.StatusOK},
		{name: "another host, an operator certificate", path: "/metrics", from: "10.0.0.5:40000", tls: verified, want: http.StatusOK},
		{name: "an address that is not one", path: "/metrics", from: "pipe", want: http.StatusUnauthorized},
		{name: "health from another host", path: "/healthz", from: "10.0.0.5:40000", want: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tc.path, nil)
			r.RemoteAddr, r.TLS = tc.from, tc.tls
			if tc.bearer != "" {
				r.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			body := w.Body.String()
			if w.Code != tc.want {
				t.Fatalf("%d, want %d: %s", w.Code, tc.want, body)
			}
			switch {
			case tc.path != "/metrics":
			case w.Code == http.StatusOK && !strings.Contains(body, "bulkhead_controller_leader "):
				t.Errorf("no metrics served: %.200s", body)
			case w.Code != http.StatusOK && (strings.Contains(body, "bulkhead_controller") || w.Header().Get("WWW-Authenticate") == ""):
				t.Errorf("refused with metrics or without WWW-Authenticate: %v %.200s", w.Header(), body)
			}
		})
	}
}
