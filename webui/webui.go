// Package webui is the controller's web UI, served by `bulkhead
// controller` itself under /ui/: a tenants page (guarantee, achieved now
// and over the history, compliance, the worst second, a sparkline; a
// tenant below its guarantee stands out and comes first), one tenant's
// VMs, VDC and rates over time, the topology's links by utilization and
// reservations, the appliances' throughput against the central
// controller's capacity estimate, and the agents. The page is plain
// JavaScript with uPlot (internal/uplot), embedded in the binary; it
// loads nothing from elsewhere (its Content-Security-Policy allows only
// the controller) and updates live from a server-sent event stream, one
// snapshot a second.
//
// The package knows nothing of the controller: a Source makes
// snapshots, the server keeps their bounded history and streams them;
// the controller gives it its operator check (Config.Guard,
// Config.Authorized), which accepts, on these routes only, the session
// cookie the login form sets (session.go).
package webui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/internal/uplot"
)

// Defaults of Config.
const (
	DefaultInterval   = time.Second
	DefaultHistory    = 600 // samples: 10 minutes at 1 s
	DefaultMaxSeries  = 4096
	DefaultMaxClients = 64
	// StreamLifetime ends an event stream, which the browser then
	// reopens (checking the session again).
	StreamLifetime = 10 * time.Minute
	// maxLoginBody bounds the login form.
	maxLoginBody = 4 << 10
)

// ContentSecurityPolicy is the UI's: everything from the controller
// itself, nothing inline, nothing from elsewhere.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// Source makes a snapshot of the cluster now (Seq and the history's
// figures left for the server to fill).
type Source func(ctx context.Context) (*Snapshot, error)

// Config configures a Server.
type Config struct {
	Source Source
	// Guard wraps a data route with the operator check (the operator
	// API's, the session cookie accepted); op names the route in the
	// controller's request metrics.
	Guard func(op string, h http.HandlerFunc) http.Handler
	// Authorized is the same check as a predicate: /ui/ shows the page
	// to an operator and the login form to anyone else.
	Authorized func(r *http.Request) bool
	// Login checks a token pasted into the login form.
	Login func(token string) bool
	// Token is the operator token the session cookie derives from;
	// empty: operators authenticate by client certificate only and the
	// login form says so.
	Token    string
	Interval time.Duration // between snapshots (DefaultInterval)
	// History is the samples kept (DefaultHistory), MaxSeries the series
	// (DefaultMaxSeries); MaxClients bounds open event streams
	// (DefaultMaxClients).
	History, MaxSeries, MaxClients int
	Logger                         *slog.Logger
	Now                            func() time.Time
}

// Server serves the UI. Its methods are safe for concurrent use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	pages *template.Template

	mu      sync.Mutex
	hist    *history
	vmsOf   map[string][]string // the VMs of each tenant, at the latest snapshot
	latest  *frame
	seq     uint64
	subs    map[chan *frame]struct{}
	stopped bool
}

//go:embed assets
var assets embed.FS

// New checks the configuration and returns a server; Run makes its
// snapshots.
func New(cfg Config) (*Server, error) {
	if cfg.Source == nil || cfg.Guard == nil || cfg.Authorized == nil || cfg.Login == nil {
		return nil, errors.New("webui: a source, a guard, an authorization check and a login check are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.MaxSeries <= 0 {
		cfg.MaxSeries = DefaultMaxSeries
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pages, err := template.ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("webui: pages: %w", err)
	}
	return &Server{cfg: cfg, log: cfg.Logger, pages: pages, hist: newHistory(cfg.History, cfg.MaxSeries),
		vmsOf: map[string][]string{}, subs: map[chan *frame]struct{}{}}, nil
}

// Register adds the UI's routes to mux: /ui/ (the page, or the login
// form; /ui redirects there), /ui/login, /ui/logout, /ui/static/
// (scripts, styles, uPlot's licence) and, for operators only,
// /ui/api/snapshot, /ui/api/history and /ui/events.
func (s *Server) Register(mux *http.ServeMux) {
	mux.Handle("GET /ui", s.headers(http.RedirectHandler(CookiePath, http.StatusMovedPermanently)))
	mux.Handle("GET /ui/{$}", s.headers(http.HandlerFunc(s.servePage)))
	mux.Handle("POST /ui/login", s.headers(http.HandlerFunc(s.serveLogin)))
	mux.Handle("POST /ui/logout", s.headers(http.HandlerFunc(s.serveLogout)))
	mux.Handle("GET /ui/static/{file}", s.headers(http.HandlerFunc(s.serveStatic)))
	mux.Handle("GET /ui/api/snapshot", s.headers(s.cfg.Guard("ui-snapshot", s.serveSnapshot)))
	mux.Handle("GET /ui/api/history", s.headers(s.cfg.Guard("ui-history", s.serveHistory)))
	mux.Handle("GET /ui/events", s.headers(s.cfg.Guard("ui-events", s.serveEvents)))
}

// headers sets the UI's security headers on every answer.
func (s *Server) headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", ContentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// Run makes a snapshot every Interval, records it in the history and
// sends it to the open event streams, until ctx ends; then it closes
// the streams.
func (s *Server) Run(ctx context.Context) {
	defer func() {
		s.mu.Lock()
		s.stopped = true
		for ch := range s.subs {
			close(ch)
			delete(s.subs, ch)
		}
		s.mu.Unlock()
	}()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	var lastErr string
	for {
		if err := s.Step(ctx); err != nil && ctx.Err() == nil && err.Error() != lastErr {
			s.log.Warn("web UI: snapshot", "err", err)
			lastErr = err.Error()
		} else if err == nil {
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Step makes one snapshot, records it and sends it to the streams.
func (s *Server) Step(ctx context.Context) error {
	snap, err := s.cfg.Source(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	snap.Seq = s.seq
	s.record(snap)
	s.latest = newFrame(snap)
	for ch := range s.subs {
		select { // the newest replaces one the stream has not sent yet
		case <-ch:
		default:
		}
		ch <- s.latest
	}
	return nil
}

// maxEncodings bounds the encodings a frame keeps (one per tenant that
// streams ask for).
const maxEncodings = 16

// frame is a published snapshot with its JSON by the tenant whose VMs it
// includes, encoded once for every stream that asks.
type frame struct {
	snap *Snapshot
	mu   sync.Mutex
	enc  map[string][]byte
}

func newFrame(s *Snapshot) *frame { return &frame{snap: s, enc: map[string][]byte{}} }

// json is the snapshot's JSON with the VMs of tenant only.
func (f *frame) json(tenant string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.enc[tenant]; ok {
		return b, nil
	}
	b, err := json.Marshal(f.snap.withVMsOf(tenant))
	if err != nil {
		return nil, fmt.Errorf("webui: encode the snapshot: %w", err)
	}
	if len(f.enc) < maxEncodings {
		f.enc[tenant] = b
	}
	return b, nil
}

// record adds a snapshot to the history, fills its tenants' figures over
// the history and orders its tenants.
func (s *Server) record(snap *Snapshot) {
	vals := map[key]float64{}
	vmsOf := map[string][]string{}
	for _, t := range snap.Tenants {
		vals[key{kindTenantGuarantee, t.Name, ""}] = t.Guarantee
		if t.Achieved != nil {
			vals[key{kindTenantAchieved, t.Name, ""}] = *t.Achieved
			b := 0.0
			if t.Below {
				b = 1
			}
			vals[key{kindTenantBelow, t.Name, ""}] = b
		}
		for _, v := range t.VMs {
			vmsOf[t.Name] = append(vmsOf[t.Name], v.Name)
			if v.Received != nil {
				vals[key{kindVMReceived, v.Name, ""}] = *v.Received
			}
			if v.Sent != nil {
				vals[key{kindVMSent, v.Name, ""}] = *v.Sent
			}
		}
	}
	for _, a := range snap.Appliances {
		if a.Throughput != nil {
			vals[key{kindAppThroughput, a.Name, ""}] = *a.Throughput
		}
		if a.Estimate != nil {
			vals[key{kindAppEstimate, a.Name, ""}] = *a.Estimate
		}
		for _, at := range a.Tenants {
			if at.Used != nil {
				vals[key{kindAppTenant, a.Name, at.Tenant}] = *at.Used
			}
		}
	}
	s.hist.add(snap.Time.UnixMilli(), vals)
	s.vmsOf = vmsOf
	if s.hist.refused > 0 {
		snap.Notes = append(snap.Notes, fmt.Sprintf("history: %d series not kept (at most %d); their charts start empty", s.hist.refused, s.cfg.MaxSeries))
	}
	snap.HistorySeconds = float64(s.cfg.History) * s.cfg.Interval.Seconds()
	for i := range snap.Tenants {
		t := &snap.Tenants[i]
		mean, lo, n := s.hist.stats(key{kindTenantAchieved, t.Name, ""})
		if n > 0 {
			t.Mean, t.Worst = ptr(mean), ptr(lo)
			t.MeanSeconds = float64(n) * s.cfg.Interval.Seconds()
		}
		bmean, _, bn := s.hist.stats(key{kindTenantBelow, t.Name, ""})
		if bn > 0 {
			t.BelowSeconds = int(math.Round(bmean * float64(bn) * s.cfg.Interval.Seconds()))
		}
	}
	SortTenants(snap.Tenants)
}

// SortTenants orders tenants as every page shows them: below their
// guarantee first, then the lowest compliance, then by name.
func SortTenants(ts []Tenant) {
	slices.SortStableFunc(ts, func(a, b Tenant) int {
		if a.Below != b.Below {
			if a.Below {
				return -1
			}
			return 1
		}
		ca, cb := 2.0, 2.0 // no compliance yet: after those with one
		if a.Compliance != nil {
			ca = *a.Compliance
		}
		if b.Compliance != nil {
			cb = *b.Compliance
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

func ptr(x float64) *float64 { return &x }

// current is the latest snapshot, or one made now when the loop has not
// made one yet.
func (s *Server) current(ctx context.Context) (*frame, error) {
	s.mu.Lock()
	f := s.latest
	s.mu.Unlock()
	if f != nil {
		return f, nil
	}
	snap, err := s.cfg.Source(ctx)
	if err != nil {
		return nil, err
	}
	snap.HistorySeconds = float64(s.cfg.History) * s.cfg.Interval.Seconds()
	SortTenants(snap.Tenants)
	return newFrame(snap), nil
}

type pageData struct {
	Error string
	// CertOnly: the controller has no operator token (operators present
	// client certificates).
	CertOnly bool
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Authorized(r) {
		s.render(w, http.StatusOK, "index.html", nil)
		return
	}
	s.render(w, http.StatusOK, "login.html", pageData{CertOnly: s.cfg.Token == ""})
}

func (s *Server) render(w http.ResponseWriter, code int, name string, data any) {
	var b bytes.Buffer
	if err := s.pages.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("web UI: page", "page", name, "err", err)
		http.Error(w, "page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// serveLogin checks the pasted token and sets the session cookie.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		s.render(w, http.StatusBadRequest, "login.html", pageData{Error: "unreadable form", CertOnly: s.cfg.Token == ""})
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if s.cfg.Token == "" {
		s.render(w, http.StatusUnauthorized, "login.html", pageData{CertOnly: true,
			Error: "this controller has no operator token: open the UI with an operator client certificate"})
		return
	}
	if token == "" || !s.cfg.Login(token) {
		s.log.Warn("web UI: login refused", "remote", r.RemoteAddr)
		s.render(w, http.StatusUnauthorized, "login.html", pageData{Error: "wrong token"})
		return
	}
	exp := s.cfg.Now().Add(SessionLifetime)
	http.SetCookie(w, sessionCookie(r, SessionValue(s.cfg.Token, exp), int(SessionLifetime.Seconds())))
	http.Redirect(w, r, CookiePath, http.StatusSeeOther)
}

func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, sessionCookie(r, "", -1))
	http.Redirect(w, r, CookiePath, http.StatusSeeOther)
}

// static are the files under /ui/static/ and their types.
var static = map[string]string{
	"app.js":            "text/javascript; charset=utf-8",
	"app.css":           "text/css; charset=utf-8",
	"uplot.js":          "text/javascript; charset=utf-8",
	"uplot.css":         "text/css; charset=utf-8",
	"LICENSE.uplot.txt": "text/plain; charset=utf-8",
	"favicon.svg":       "image/svg+xml",
}

func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	typ, ok := static[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	var body []byte
	switch name {
	case "uplot.js":
		body = []byte(uplot.JS())
	case "uplot.css":
		body = []byte(uplot.CSS())
	case "LICENSE.uplot.txt":
		body = []byte(uplot.License())
	default:
		var err error
		if body, err = fs.ReadFile(assets, "assets/"+name); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", typ)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(body)
}

// serveSnapshot answers the latest snapshot (?tenant=NAME: with that
// tenant's VMs).
func (s *Server) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	f, err := s.current(r.Context())
	var b []byte
	if err == nil {
		b, err = f.json(r.URL.Query().Get("tenant"))
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// History is the history's JSON: sample times (Unix seconds) and, per
// object, its series aligned with them (null: no value then).
type History struct {
	Interval   float64                      `json:"interval"`
	T          []float64                    `json:"t"`
	Tenants    map[string]*TenantHistory    `json:"tenants"`
	VMs        map[string]*VMHistory        `json:"vms"`
	Appliances map[string]*ApplianceHistory `json:"appliances"`
}

// TenantHistory is a tenant's series.
type TenantHistory struct {
	Achieved  values `json:"achieved"`
	Guarantee values `json:"guarantee"`
	Below     values `json:"below"`
}

// VMHistory is a VM's series.
type VMHistory struct {
	Received values `json:"received"`
	Sent     values `json:"sent"`
}

// ApplianceHistory is an appliance's series, and its tenants' use.
type ApplianceHistory struct {
	Throughput values            `json:"throughput"`
	Estimate   values            `json:"estimate"`
	Tenants    map[string]values `json:"tenants"`
}

// history returns the history of the tenants and appliances, and the
// VMs of tenant (if not empty).
func (s *Server) history(tenant string) *History {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hist
	out := &History{Interval: s.cfg.Interval.Seconds(), T: h.timesSec(), Tenants: map[string]*TenantHistory{},
		VMs: map[string]*VMHistory{}, Appliances: map[string]*ApplianceHistory{}}
	for k := range h.series {
		switch k.kind {
		case kindTenantAchieved, kindTenantGuarantee, kindTenantBelow:
			if out.Tenants[k.name] == nil {
				out.Tenants[k.name] = &TenantHistory{
					Achieved:  h.values(key{kindTenantAchieved, k.name, ""}),
					Guarantee: h.values(key{kindTenantGuarantee, k.name, ""}),
					Below:     h.values(key{kindTenantBelow, k.name, ""}),
				}
			}
		case kindAppThroughput, kindAppEstimate, kindAppTenant:
			a := out.Appliances[k.name]
			if a == nil {
				a = &ApplianceHistory{Throughput: h.values(key{kindAppThroughput, k.name, ""}),
					Estimate: h.values(key{kindAppEstimate, k.name, ""}), Tenants: map[string]values{}}
				out.Appliances[k.name] = a
			}
			if k.kind == kindAppTenant {
				a.Tenants[k.sub] = h.values(k)
			}
		}
	}
	for _, vm := range s.vmsOf[tenant] {
		rv, sv := h.values(key{kindVMReceived, vm, ""}), h.values(key{kindVMSent, vm, ""})
		if rv != nil || sv != nil {
			out.VMs[vm] = &VMHistory{Received: rv, Sent: sv}
		}
	}
	return out
}

func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.history(r.URL.Query().Get("tenant")))
}

// subscribe opens a stream's channel (false: too many streams, or the
// server stopped).
func (s *Server) subscribe() (chan *frame, *frame, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || len(s.subs) >= s.cfg.MaxClients {
		return nil, nil, false
	}
	ch := make(chan *frame, 1)
	s.subs[ch] = struct{}{}
	return ch, s.latest, true
}

func (s *Server) unsubscribe(ch chan *frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, ch)
}

// serveEvents streams snapshots as server-sent events ("snapshot", the
// JSON of /ui/api/snapshot), the latest at once and then every one the
// loop makes, for at most StreamLifetime.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	tenant := r.URL.Query().Get("tenant")
	ch, latest, ok := s.subscribe()
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "too many open event streams, or the controller is stopping"})
		return
	}
	defer s.unsubscribe(ch)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(b []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second)) // the server's WriteTimeout would end the stream
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	event := func(f *frame) error {
		js, err := f.json(tenant)
		if err != nil {
			return err
		}
		return send(fmt.Appendf(nil, "event: snapshot\nid: %d\ndata: %s\n\n", f.snap.Seq, js))
	}
	if err := send([]byte("retry: 2000\n\n")); err != nil {
		return
	}
	if latest != nil && event(latest) != nil {
		return
	}
	end := time.NewTimer(StreamLifetime)
	defer end.Stop()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-ping.C:
			if send([]byte(": ping\n\n")) != nil {
				return
			}
		case f, ok := <-ch:
			if !ok || event(f) != nil {
				return
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
