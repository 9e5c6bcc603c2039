package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/store"
	"github.com/bulkhead-dc/bulkhead/webui"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// kindsByPlural maps the API's path segments to kinds.
var kindsByPlural = map[string]string{
	"clusters":   api.KindCluster,
	"hosts":      api.KindHost,
	"tenants":    api.KindTenant,
	"appliances": api.KindAppliance,
}

// Handler serves the operator API, /healthz, /readyz, /metrics (see
// metricsAuth), /api/v1/openapi.yaml and the web UI (/ui/, package
// webui).
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", c.readyz)
	mux.Handle("GET /metrics", c.metricsAuth(promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /api/v1/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(api.OpenAPI())
	})
	mux.Handle("POST /api/v1/apply", c.auth("apply", c.serveApply))
	mux.Handle("GET /api/v1/{kind}", c.auth("list", c.serveList))
	mux.Handle("GET /api/v1/{kind}/{name}", c.auth("get", c.serveGet))
	mux.Handle("DELETE /api/v1/{kind}/{name}", c.auth("delete", c.serveDelete))
	c.ui.Register(mux)
	return mux
}

func (c *Controller) readyz(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	err := c.ready
	c.mu.Unlock()
	if err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if _, _, err := c.cfg.Store.List(r.Context(), api.KindCluster); err != nil {
		http.Error(w, "not ready: store: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// statusWriter remembers the status code for the request counter.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the web
// UI's event stream flushes and extends its write deadline).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// auth checks the operator's credentials and counts the request.
func (c *Controller) auth(op string, h http.HandlerFunc) http.Handler { return c.guard(op, false, h) }

// guard is auth; with session, the web UI's session cookie (set by its
// login form for the operator token) is accepted too — on the UI's
// routes only.
func (c *Controller) guard(op string, session bool, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() { c.met.requests.WithLabelValues(op, strconv.Itoa(sw.code)).Inc() }()
		if !c.operator(r, session) {
			writeProblem(sw, http.StatusUnauthorized, &api.Problem{Error: "unauthorized: send the operator token (Authorization: Bearer TOKEN) or an operator client certificate"})
			return
		}
		h(sw, r)
	})
}

// operator says whether a request is an operator's: the token as a
// bearer, an operator client certificate (Config.Authn) or, with
// session, a valid web UI session cookie.
func (c *Controller) operator(r *http.Request, session bool) bool {
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if c.authorized(bearer, &RequestInfo{TLS: r.TLS}) {
		return true
	}
	return session && webui.RequestSession(r, c.cfg.Token, c.cfg.Now())
}

// metricsAuth serves /metrics under the host agent's rule for its own
// (agent.CheckHTTP: loopback, or a token): every tenant's guaranteed and
// achieved rates and every host's agent are there, not for whatever can
// reach the API address. A request over loopback needs nothing; any
// other needs the operator's credentials (the token as a bearer, or an
// operator client certificate), as the API does.
func (c *Controller) metricsAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopback(r) && !c.operator(r, false) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bulkhead-controller"`)
			writeProblem(w, http.StatusUnauthorized, &api.Problem{Error: "unauthorized: /metrics shows every tenant's rates; from off this machine send the operator token (Authorization: Bearer TOKEN; Prometheus: authorization.credentials_file) or an operator client certificate"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopback says whether a request came over the loopback interface.
func loopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

func (c *Controller) kind(w http.ResponseWriter, r *http.Request) (string, bool) {
	k, ok := kindsByPlural[r.PathValue("kind")]
	if !ok {
		writeProblem(w, http.StatusNotFound, &api.Problem{Error: fmt.Sprintf("unknown kind %q (use clusters, hosts, tenants or appliances)", r.PathValue("kind"))})
	}
	return k, ok
}

func (c *Controller) serveApply(w http.ResponseWriter, r *http.Request) {
	body := http.MaxBytesReader(w, r.Body, api.MaxBytes)
	var req api.ObjectList
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeProblem(w, http.StatusRequestEntityTooLarge, &api.Problem{Error: fmt.Sprintf("request larger than %d bytes", api.MaxBytes)})
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("request body: %w", err))
		return
	}
	dry, _ := strconv.ParseBool(r.URL.Query().Get("dryRun"))
	res, err := c.Apply(r.Context(), req.Objects, dry)
	if err != nil {
		c.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (c *Controller) serveList(w http.ResponseWriter, r *http.Request) {
	kind, ok := c.kind(w, r)
	if !ok {
		return
	}
	objs, err := c.List(r.Context(), kind)
	if err != nil {
		c.fail(w, err)
		return
	}
	if objs == nil {
		objs = []api.Object{}
	}
	writeJSON(w, http.StatusOK, api.ObjectList{Objects: objs})
}

func (c *Controller) serveGet(w http.ResponseWriter, r *http.Request) {
	kind, ok := c.kind(w, r)
	if !ok {
		return
	}
	o, err := c.Get(r.Context(), kind, r.PathValue("name"))
	if err != nil {
		c.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (c *Controller) serveDelete(w http.ResponseWriter, r *http.Request) {
	kind, ok := c.kind(w, r)
	if !ok {
		return
	}
	o, err := c.Delete(r.Context(), kind, r.PathValue("name"))
	if err != nil {
		c.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// fail answers an error with its status code.
func (c *Controller) fail(w http.ResponseWriter, err error) {
	var (
		inv *Invalid
		nl  *NotLeader
		use *InUse
	)
	switch {
	case errors.As(err, &nl):
		writeProblem(w, http.StatusMisdirectedRequest, &api.Problem{Error: nl.Error(), Leader: nl.Leader})
	case errors.As(err, &inv):
		writeError(w, http.StatusUnprocessableEntity, inv.Err)
	case errors.As(err, &use):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, fmt.Errorf("%w: the cluster kept changing; retry", err))
	default:
		c.log.Error("request failed", "err", err)
		writeError(w, http.StatusInternalServerError, err)
	}
}

// writeError answers with err's located problems.
func writeError(w http.ResponseWriter, code int, err error) {
	p := &api.Problem{Error: err.Error()}
	for _, fe := range model.FieldErrors(err) {
		p.Problems = append(p.Problems, api.ProblemItem{Object: fe.File, Line: fe.Line, Path: fe.Path, Message: fe.Msg})
	}
	writeProblem(w, code, p)
}

func writeProblem(w http.ResponseWriter, code int, p *api.Problem) { writeJSON(w, code, p) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}
