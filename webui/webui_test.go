package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "operator-token"

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// source hands out scripted snapshots, one a call (the last one again
// when they run out).
type source struct {
	mu    sync.Mutex
	snaps []*Snapshot
	calls int
}

func (s *source) next(context.Context) (*Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.snaps)-1)
	s.calls++
	c := *s.snaps[i]
	c.Time = t0.Add(time.Duration(s.calls) * time.Second)
	c.Tenants = append([]Tenant(nil), s.snaps[i].Tenants...)
	return &c, nil
}

func f(x float64) *float64 { return &x }

// twoTenants: A below its guarantee with a VM, B fine.
func twoTenants() *Snapshot {
	return &Snapshot{Controller: Controller{ID: "http://c1", Leading: true, Leader: "http://c1"},
		Tenants: []Tenant{
			{Name: "B", Guarantee: 200e6, Achieved: f(250e6)},
			{Name: "A", Guarantee: 600e6, Achieved: f(100e6), Below: true,
				VMs: []VM{{Name: "a-rx", Host: "s2", In: 600e6, Out: 600e6, Received: f(100e6), Sent: f(1e6)}}},
		}}
}

// newTestServer is a Server behind an HTTP server, with the operator
// check the controller gives it (bearer token, or the session cookie on
// these routes).
func newTestServer(t *testing.T, src Source, tls bool, mod func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	ok := func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer "+testToken || RequestSession(r, testToken, time.Now())
	}
	cfg := Config{Source: src, Token: testToken,
		Guard: func(op string, h http.HandlerFunc) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !ok(r) {
					http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
					return
				}
				h(w, r)
			})
		},
		Authorized: ok,
		Login:      func(tok string) bool { return tok == testToken },
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Register(mux)
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	return s, srv
}

func noRedirect(c *http.Client) *http.Client {
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

func login(t *testing.T, srv *httptest.Server, token string) *http.Response {
	t.Helper()
	resp, err := noRedirect(srv.Client()).PostForm(srv.URL+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestSession(t *testing.T) {
	exp := t0.Add(time.Hour)
	good := SessionValue(testToken, exp)
	for _, tc := range []struct {
		name, token, value string
		now                time.Time
		want               bool
	}{
		{"valid", testToken, good, t0, true},
		{"expired", testToken, good, exp, false},
		{"another token's", "other", good, t0, false},
		{"no token configured", "", good, t0, false},
		{"the token itself", testToken, testToken, t0, false},
		{"tampered expiry", testToken, strings.Replace(good, fmt.Sprint(exp.Unix()), fmt.Sprint(exp.Unix()+3600), 1), t0, false},
		{"tampered MAC", testToken, good[:len(good)-2] + "AA", t0, false},
		{"beyond a session's lifetime", testToken, SessionValue(testToken, t0.Add(10*SessionLifetime)), t0, false},
		{"empty", testToken, "", t0, false},
		{"garbage", testToken, "v1.x.y", t0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidSession(tc.token, tc.value, tc.now); got != tc.want {
				t.Errorf("ValidSession = %v, want %v", got, tc.want)
			}
		})
	}
	if strings.Contains(good, testToken) {
		t.Errorf("the session value %q carries the token", good)
	}
}

// TestAuth: without credentials /ui/ is the login form and the data
// routes answer 401; a wrong token is refused; the right one sets an
// HttpOnly, SameSite=Strict cookie for /ui/ that the data routes accept.
func TestAuth(t *testing.T) {
	_, srv := newTestServer(t, (&source{snaps: []*Snapshot{twoTenants()}}).next, false, nil)
	bad := login(t, srv, "wrong")
	if bad.StatusCode != http.StatusUnauthorized || len(bad.Cookies()) != 0 {
		t.Errorf("wrong token: %d, cookies %v", bad.StatusCode, bad.Cookies())
	}
	good := login(t, srv, testToken)
	if good.StatusCode != http.StatusSeeOther || good.Header.Get("Location") != "/ui/" {
		t.Errorf("login: %d to %q", good.StatusCode, good.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range good.Cookies() {
		if c.Name == CookieName {
			ck = c
		}
	}
	if ck == nil {
		t.Fatalf("login set no %s cookie: %v", CookieName, good.Cookies())
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.Secure || ck.MaxAge <= 0 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, not Secure over plain HTTP, a lifetime", ck)
	}
	if strings.Contains(ck.Value, testToken) {
		t.Errorf("the cookie holds the token: %q", ck.Value)
	}
	for _, tc := range []struct {
		method, path string
		auth         string // "", "bearer", "cookie", "bad-cookie"
		want         int
		body         string // a substring of the answer
	}{
		{"GET", "/ui", "", 301, ""},
		{"GET", "/ui/", "", 200, `id="token"`},
		{"GET", "/ui/", "bad-cookie", 200, `id="token"`},
		{"GET", "/ui/", "cookie", 200, `static/app.js`},
		{"GET", "/ui/", "bearer", 200, `static/app.js`},
		{"GET", "/ui/api/snapshot", "", 401, "unauthorized"},
		{"GET", "/ui/api/history", "", 401, "unauthorized"},
		{"GET", "/ui/events", "", 401, "unauthorized"},
		{"GET", "/ui/api/snapshot", "bad-cookie", 401, "unauthorized"},
		{"GET", "/ui/api/snapshot", "cookie", 200, `"tenants"`},
		{"GET", "/ui/api/snapshot", "bearer", 200, `"tenants"`},
		{"GET", "/ui/api/history", "cookie", 200, `"t"`},
		{"GET", "/ui/static/app.js", "", 200, "EventSource"},
		{"GET", "/ui/static/uplot.js", "", 200, "uPlot"},
		{"GET", "/ui/static/LICENSE.uplot.txt", "", 200, "MIT"},
		{"GET", "/ui/static/secret", "", 404, ""},
		{"POST", "/ui/logout", "cookie", 303, ""},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.auth, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			switch tc.auth {
			case "bearer":
				req.Header.Set("Authorization", "Bearer "+testToken)
			case "cookie":
				req.AddCookie(ck)
			case "bad-cookie":
				req.AddCookie(&http.Cookie{Name: CookieName, Value: SessionValue("not the token", time.Now().Add(time.Hour))})
			}
			if tc.path == "/ui/events" && tc.want == 200 {
				t.Fatal("streams are tested in TestEvents")
			}
			resp, err := noRedirect(srv.Client()).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || !strings.Contains(string(b), tc.body) {
				t.Errorf("%d, want %d with %q:\n%.300s", resp.StatusCode, tc.want, tc.body, b)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); csp != ContentSecurityPolicy {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if tc.path == "/ui/logout" {
				if cs := resp.Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
					t.Errorf("logout did not clear the cookie: %v", cs)
				}
			}
		})
	}
}

// TestSecureCookie: over TLS the session cookie is Secure.
func TestSecureCookie(t *testing.T) {
	_, srv := newTestServer(t, (&source{snaps: []*Snapshot{twoTenants()}}).next, true, nil)
	resp := login(t, srv, testToken)
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("cookies over TLS: %v, want one Secure", cs)
	}
}

// TestCertOnly: a controller without a token (client certificates)
// refuses logins and says why.
func TestCertOnly(t *testing.T) {
	_, srv := newTestServer(t, (&source{snaps: []*Snapshot{twoTenants()}}).next, false, func(c *Config) { c.Token = "" })
	resp, err := noRedirect(srv.Client()).PostForm(srv.URL+"/ui/login", url.Values{"token": {""}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(string(b), "client certificate") {
		t.Errorf("login without a token configured: %d, %v\n%s", resp.StatusCode, resp.Cookies(), b)
	}
}

// readEvent reads one server-sent event's data.
func readEvent(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		if line == "" && data != "" {
			return data
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = d
		}
	}
}

// TestEvents: the stream sends the latest snapshot at once and then each
// new one, with the VMs of the tenant asked for only; the tenants come
// below their guarantee first; the stream ends when the server stops.
func TestEvents(t *testing.T) {
	s, srv := newTestServer(t, (&source{snaps: []*Snapshot{twoTenants()}}).next, false, func(c *Config) { c.Interval = 50 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	for _, tc := range []struct {
		query   string
		withVMs string
	}{{"", ""}, {"?tenant=A", "A"}, {"?tenant=B", ""}} {
		t.Run(tc.query, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/ui/events"+tc.query, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			r := bufio.NewReader(resp.Body)
			var last uint64
			for i := 0; i < 3; i++ {
				var snap Snapshot
				if err := json.Unmarshal([]byte(readEvent(t, r)), &snap); err != nil {
					t.Fatal(err)
				}
				if snap.Seq <= last {
					t.Errorf("snapshot %d after %d", snap.Seq, last)
				}
				last = snap.Seq
				if len(snap.Tenants) != 2 || snap.Tenants[0].Name != "A" || !snap.Tenants[0].Below {
					t.Fatalf("tenants %+v: want A (below) first", snap.Tenants)
				}
				for _, tn := range snap.Tenants {
					if (len(tn.VMs) > 0) != (tn.Name == tc.withVMs) {
						t.Errorf("tenant %s has %d VMs in the stream of %q", tn.Name, len(tn.VMs), tc.query)
					}
				}
			}
		})
	}
	// Stopping the server ends the streams.
	req, _ := http.NewRequest("GET", srv.URL+"/ui/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cancel()
	<-done
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); ended <- err }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("a stream still open 5 s after the server stopped")
	}
}

// TestMaxClients: streams beyond the bound are refused.
func TestMaxClients(t *testing.T) {
	s, srv := newTestServer(t, (&source{snaps: []*Snapshot{twoTenants()}}).next, false, func(c *Config) { c.MaxClients = 2 })
	if err := s.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	var codes []int
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("GET", srv.URL+"/ui/events", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != http.StatusServiceUnavailable {
		t.Errorf("three streams with at most two: %v", codes)
	}
}

func TestHistoryBounded(t *testing.T) {
	for _, tc := range []struct {
		name            string
		n, maxSeries    int
		samples, series int // samples added, series given in each
		wantCount       int
		wantSeries      int
		wantRefused     int
	}{
		{"fewer samples than kept", 10, 100, 4, 3, 4, 3, 0},
		{"the ring wraps", 10, 100, 25, 3, 10, 3, 0},
		{"series beyond the bound", 10, 5, 12, 8, 10, 5, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory(tc.n, tc.maxSeries)
			for i := 0; i < tc.samples; i++ {
				vals := map[key]float64{}
				for j := 0; j < tc.series; j++ {
					vals[key{kindTenantAchieved, fmt.Sprint(j), ""}] = float64(i)
				}
				h.add(int64(i)*1000, vals)
			}
			if h.count != tc.wantCount || len(h.series) != tc.wantSeries || h.refused != tc.wantRefused {
				t.Errorf("%d samples, %d series, %d refused; want %d, %d, %d", h.count, len(h.series), h.refused, tc.wantCount, tc.wantSeries, tc.wantRefused)
			}
			ts := h.timesSec()
			if len(ts) != tc.wantCount || ts[len(ts)-1] != float64(tc.samples-1) || ts[0] != float64(tc.samples-tc.wantCount) {
				t.Errorf("times %v", ts)
			}
			for k := range h.series {
				v := h.values(k)
				if len(v) != tc.wantCount || v[len(v)-1] != float32(tc.samples-1) || v[0] != float32(tc.samples-tc.wantCount) {
					t.Errorf("series %v: %v, want the last %d samples oldest first", k, v, tc.wantCount)
				}
			}
		})
	}
	// A series without a value for a whole window is forgotten.
	h := newHistory(5, 10)
	h.add(0, map[key]float64{{kindVMReceived, "gone", ""}: 1})
	for i := 1; i <= 5; i++ {
		h.add(int64(i), nil)
	}
	if len(h.series) != 0 {
		t.Errorf("a series without values for a window is kept: %v", h.series)
	}
	b, _ := json.Marshal(values{1, float32(math.NaN()), 2.5e9})
	if string(b) != "[1,null,2.5e+09]" {
		t.Errorf("values as JSON: %s", b)
	}
}

// TestRecord: the history's figures of each tenant (mean, worst second,
// seconds below) and the order of the tenants.
func TestRecord(t *testing.T) {
	ach := []float64{100e6, 300e6, 500e6}
	var snaps []*Snapshot
	for i, a := range ach {
		snaps = append(snaps, &Snapshot{Tenants: []Tenant{
			{Name: "B", Guarantee: 200e6},                                         // no report
			{Name: "A", Guarantee: 600e6, Achieved: f(a), Below: i != 1},          // below twice, and now
			{Name: "C", Guarantee: 100e6, Achieved: f(100e6), Compliance: f(0.5)}, // lower compliance than none
		}})
	}
	src := &source{snaps: snaps}
	s, _ := newTestServer(t, src.next, false, nil)
	for range ach {
		if err := s.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	fr, err := s.current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap := fr.snap
	var names []string
	for _, tn := range snap.Tenants {
		names = append(names, tn.Name)
	}
	if got := strings.Join(names, ","); got != "A,C,B" {
		t.Errorf("order %s, want A (below), C (compliance 50%%), B", got)
	}
	a := snap.Tenants[0]
	if a.Mean == nil || *a.Mean != 300e6 || a.Worst == nil || *a.Worst != 100e6 || a.BelowSeconds != 2 || a.MeanSeconds != 3 {
		t.Errorf("A: %+v; want mean 300e6, worst 100e6, 2 s below over 3 s", a)
	}
	if b := snap.Tenants[2]; b.Mean != nil || b.Worst != nil {
		t.Errorf("B without reports has figures: %+v", b)
	}
	h := s.history("A")
	if len(h.T) != 3 || len(h.Tenants) != 3 || len(h.Tenants["A"].Achieved) != 3 || h.Tenants["B"].Achieved != nil {
		t.Errorf("history: %+v", h)
	}
}
