package agent

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drive"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// agentMetrics are one agent's Prometheus metrics, in its own registry.
type agentMetrics struct {
	reg          *prometheus.Registry
	steps        prometheus.Counter
	late         prometheus.Counter
	stepSeconds  prometheus.Histogram
	limitUpdates prometheus.Counter
	limitSeconds prometheus.Histogram
	sent         prometheus.Counter
	sentBytes    prometheus.Counter
	lost         prometheus.Counter
	received     prometheus.Counter
	dropped      *prometheus.CounterVec
	sendErrors   *prometheus.CounterVec
	errors       *prometheus.CounterVec
	unheld       prometheus.Counter
	pairRate     *prometheus.GaugeVec
	pairLimit    *prometheus.GaugeVec

	nSteps     atomic.Int64
	stepNanos  atomic.Int64 // total time in steps
	nUpdates   atomic.Int64
	updateNano atomic.Int64             // total time of limiter updates
	nDrops     map[string]*atomic.Int64 // by reason; the map is fixed at creation
}

// drop counts a dropped datagram.
func (m *agentMetrics) drop(reason string) { m.dropN(reason, 1) }

func (m *agentMetrics) dropN(reason string, k int64) {
	m.dropped.WithLabelValues(reason).Add(float64(k))
	if n, ok := m.nDrops[reason]; ok {
		n.Add(k)
	}
}

// step counts a step.
func (m *agentMetrics) step() {
	m.steps.Inc()
	m.nSteps.Add(1)
}

func newMetrics(host string, drv *drive.Host) *agentMetrics {
	reg := prometheus.NewRegistry()
	c := prometheus.Labels{"host": host}
	stat := func(name, help string, f func(drive.Stats) int64) prometheus.CounterFunc {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: c},
			func() float64 { return float64(f(drv.Stats())) })
	}
	m := &agentMetrics{
		reg: reg,
		steps: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_agent_steps_total",
			Help: "Mechanism steps run.", ConstLabels: c}),
		late: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_agent_late_steps_total",
			Help: "Steps that started more than a period late (periods were skipped).", ConstLabels: c}),
		stepSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bulkhead_agent_step_seconds",
			Help: "Time of one step: reading counters, the mechanism, applying limits, sending.", ConstLabels: c,
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 12)}),
		limitUpdates: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_agent_limit_updates_total",
			Help: "Limiter settings applied.", ConstLabels: c}),
		limitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bulkhead_agent_limit_update_seconds",
			Help: "Time to apply one limiter setting on the data path.", ConstLabels: c,
			Buckets: prometheus.ExponentialBuckets(2e-6, 2, 12)}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_agent_messages_sent_total",
			Help: "Control messages sent to other agents.", ConstLabels: c}),
		sentBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_agent_message_bytes_sent_total",
			Help: "Bytes of control messages sent.", ConstLabels: c}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_agent_messages_lost_total",
			Help: "Control messages dropped on purpose after sealing (fault injection: Config.LoseSent).", ConstLabels: c}),
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_agent_messages_received_total",
			Help: "Control messages accepted.", ConstLabels: c}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkhead_agent_messages_dropped_total",
			Help: "Received datagrams dropped, by reason.", ConstLabels: c}, []string{"reason"}),
		sendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkhead_agent_send_errors_total",
			Help: "Messages not sent, by reason.", ConstLabels: c}, []string{"reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkhead_agent_errors_total",
			Help: "Failed data-path operations, by stage.", ConstLabels: c}, []string{"stage"}),
		unheld: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_agent_unheld_total",
			Help: fmt.Sprintf("Settings the data path still did not hold after %d consecutive re-applies (each reported once until it holds).", unheldAfter), ConstLabels: c}),
		pairRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bulkhead_agent_pair_rate_bps",
			Help: "Measured rate of a VM pair in the last period (scenario units), by side.", ConstLabels: c}, []string{"src", "dst", "side"}),
		pairLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bulkhead_agent_pair_limit_bps",
			Help: "Pair limiter in force (scenario units; +Inf: none).", ConstLabels: c}, []string{"src", "dst"}),
	}
	reg.MustRegister(m.steps, m.late, m.stepSeconds, m.limitUpdates, m.limitSeconds, m.sent, m.sentBytes, m.lost, m.received,
		m.dropped, m.sendErrors, m.errors, m.unheld, m.pairRate, m.pairLimit,
		stat("bulkhead_agent_writes_total", "Limits and schedulers written to the data path.",
			func(s drive.Stats) int64 { return s.Writes }),
		stat("bulkhead_agent_write_failures_total", "Writes the data path refused (each is retried at the next step).",
			func(s drive.Stats) int64 { return s.Failed }),
		stat("bulkhead_agent_retries_total", "Writes of settings the mechanism had already asked for: after a refused write, or because the data path lost them.",
			func(s drive.Stats) int64 { return s.Retries }),
		stat("bulkhead_agent_invalid_settings_total", "Settings of the mechanism refused by the driver core's checks.",
			func(s drive.Stats) int64 { return s.Invalid }),
		stat("bulkhead_agent_model_updates_total", "Model changes handed to the mechanism.",
			func(s drive.Stats) int64 { return s.Updates }),
	)
	m.nDrops = map[string]*atomic.Int64{}
	for _, r := range dropReasons {
		m.dropped.WithLabelValues(r)
		m.nDrops[r] = &atomic.Int64{}
	}
	return m
}

// State is what an agent exposes at /state.
type State struct {
	Host      string             `json:"host"`
	Mechanism string             `json:"mechanism"`
	Period    string             `json:"period"`
	Steps     int64              `json:"steps"`
	Updated   time.Time          `json:"updated"`
	Inbox     int                `json:"last_inbox"`
	Outbox    int                `json:"last_outbox"`
	Egress    []PairState        `json:"egress"`
	Ingress   []PairState        `json:"ingress"`
	VMs       []VMState          `json:"vms"`
	Dropped   map[string]float64 `json:"messages_dropped"`
}

// PairState is one pair in State (rates in the scenario's units).
type PairState struct {
	Src          string   `json:"src"`
	Dst          string   `json:"dst"`
	Rate         float64  `json:"rate"`
	Limit        *float64 `json:"limit,omitempty"` // absent: none
	LimiterBound bool     `json:"limiter_bound,omitempty"`
	Losses       float64  `json:"losses,omitempty"`
}

// VMState is one VM in State (mech.VMObs, rates in the scenario's units).
type VMState struct {
	VM           string   `json:"vm"`
	InArrival    float64  `json:"in_arrival"`
	InRate       float64  `json:"in_rate"`
	InDrops      float64  `json:"in_drops"`
	OutRate      float64  `json:"out_rate"`
	DropSrc      string   `json:"drop_src,omitempty"`
	EgressLimit  *float64 `json:"egress_limit,omitempty"`
	IngressLimit *float64 `json:"ingress_limit,omitempty"`
	// InTotal and OutTotal are what the VM received and sent since the
	// agent started (rate × period summed over steps; the scenario's
	// units × seconds), for averages over any interval.
	InTotal  float64 `json:"in_total"`
	OutTotal float64 `json:"out_total"`
}

func finite(r float64) *float64 {
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return nil
	}
	return &r
}

// clonePairStates copies pair states, their limits with them (record
// reuses both).
func clonePairStates(ps []PairState) []PairState {
	out := slices.Clone(ps)
	for i := range out {
		if l := out[i].Limit; l != nil {
			v := *l
			out[i].Limit = &v
		}
	}
	return out
}

// record updates the state and gauges after a step.
func (a *Agent) record(obs *mech.HostObs, inbox, outbox int) {
	ps := func(out []PairState, os []mech.PairObs, idx []int32, dir mech.Direction) []PairState {
		side := dirName(dir)
		if out == nil {
			out = make([]PairState, 0, len(os)) // never null in /state
		}
		out = out[:0]
		for i, o := range os {
			// the limit's storage is the previous step's at this
			// position when it had one (Snapshot copies it)
			var lim *float64
			if !math.IsInf(o.Limit, 0) && !math.IsNaN(o.Limit) { // finite
				if i < cap(out) {
					lim = out[:i+1][i].Limit
				}
				if lim == nil {
					lim = new(float64)
				}
				*lim = o.Limit
			}
			out = append(out, PairState{Src: o.Pair.Src, Dst: o.Pair.Dst, Rate: o.Rate, Limit: lim, LimiterBound: o.LimiterBound, Losses: o.Losses})
			// the pair's gauges, kept by its index once made
			var info *pairInfo
			if len(idx) == len(os) {
				info = &a.pairs[idx[i]]
			}
			// (set only when its value changes: a gauge per pair and
			// direction, apart in memory, costs the step more to write
			// than the pair's own record, which it is compared with)
			if info == nil || info.rate[dir] == nil {
				g := a.met.pairRate.WithLabelValues(o.Pair.Src, o.Pair.Dst, side)
				if info != nil {
					info.rate[dir], info.rateSet[dir] = g, o.Rate
				}
				g.Set(o.Rate)
			} else if info.rateSet[dir] != o.Rate {
				info.rateSet[dir] = o.Rate
				info.rate[dir].Set(o.Rate)
			}
			if dir == mech.Egress {
				if info == nil || info.limit == nil {
					g := a.met.pairLimit.WithLabelValues(o.Pair.Src, o.Pair.Dst)
					if info != nil {
						info.limit, info.limitSet = g, o.Limit
					}
					g.Set(o.Limit)
				} else if info.limitSet != o.Limit {
					info.limitSet = o.Limit
					info.limit.Set(o.Limit)
				}
			}
		}
		return out
	}
	if a.totals == nil {
		a.totals = map[string][2]float64{}
	}
	// The state's slices are reused from step to step (Snapshot copies
	// them).
	a.stMu.Lock()
	defer a.stMu.Unlock()
	st := &a.state
	st.Egress, st.Ingress = ps(st.Egress, obs.Egress, a.egIdx, mech.Egress), ps(st.Ingress, obs.Ingress, a.inIdx, mech.Ingress)
	if st.VMs == nil {
		st.VMs = make([]VMState, 0, len(obs.VMs))
	}
	st.VMs = st.VMs[:0]
	for _, v := range obs.VMs {
		t := a.totals[v.VM]
		t[0] += v.InRate * obs.Period.Seconds()
		t[1] += v.OutRate * obs.Period.Seconds()
		a.totals[v.VM] = t
		s := VMState{VM: v.VM, InArrival: v.InArrival, InRate: v.InRate, InDrops: v.InDrops, OutRate: v.OutRate, DropSrc: v.DropSrc,
			InTotal: t[0], OutTotal: t[1]}
		if l, ok := a.enf.vmLimits[mech.Egress][v.VM]; ok {
			s.EgressLimit = finite(l)
		}
		if l, ok := a.enf.vmLimits[mech.Ingress][v.VM]; ok {
			s.IngressLimit = finite(l)
		}
		st.VMs = append(st.VMs, s)
	}
	st.Steps++
	st.Updated = time.Now().UTC()
	st.Inbox, st.Outbox = inbox, outbox
}

// Snapshot returns the agent's state after its latest step.
func (a *Agent) Snapshot() State {
	a.stMu.Lock()
	s := a.state
	s.Egress, s.Ingress, s.VMs = clonePairStates(s.Egress), clonePairStates(s.Ingress), slices.Clone(s.VMs)
	a.stMu.Unlock()
	s.Dropped = a.Dropped()
	return s
}

// Dropped returns the received datagrams dropped so far, by reason.
func (a *Agent) Dropped() map[string]float64 {
	out := map[string]float64{}
	for r, n := range a.met.nDrops {
		out[r] = float64(n.Load())
	}
	return out
}

// Steps returns the steps run so far.
func (a *Agent) Steps() int64 { return a.met.nSteps.Load() }

// StepTime returns the total time spent in steps so far (reading
// counters, the mechanism, applying limits, sending).
func (a *Agent) StepTime() time.Duration { return time.Duration(a.met.stepNanos.Load()) }

// LimitUpdates returns the limiter settings applied so far and their
// total time.
func (a *Agent) LimitUpdates() (int64, time.Duration) {
	return a.met.nUpdates.Load(), time.Duration(a.met.updateNano.Load())
}

// httpServer listens on cfg.HTTP and serves /metrics, /state, /healthz.
func (a *Agent) httpServer() (*http.Server, net.Listener, error) {
	addr, err := httpAddr(a.cfg.HTTP)
	if err != nil {
		return nil, nil, fmt.Errorf("agent %s: http: %w", a.cfg.Host, err)
	}
	if err := checkExposure(addr, a.cfg.HTTPToken); err != nil {
		return nil, nil, fmt.Errorf("agent %s: http: %w", a.cfg.Host, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("agent %s: http: %w", a.cfg.Host, err)
	}
	ln = netutil.LimitListener(ln, MaxHTTPConns)
	mux := http.NewServeMux()
	mux.Handle("/metrics", requireToken(a.cfg.HTTPToken, promhttp.HandlerFor(a.met.reg, promhttp.HandlerOpts{})))
	mux.Handle("/state", requireToken(a.cfg.HTTPToken, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.Snapshot())
	})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	a.log.Info("agent http", "addr", ln.Addr().String())
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}, ln, nil
}

// CheckHTTP checks an HTTP address and token as Config.HTTP and
// Config.HTTPToken take them, so that a command can refuse them before it
// starts anything.
func CheckHTTP(addr, token string) error {
	a, err := httpAddr(addr)
	if err != nil {
		return err
	}
	return checkExposure(a, token)
}

// checkExposure refuses to serve tenants' rates off loopback without a
// token: any VM that can route to the address could read them.
func checkExposure(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if token != "" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	return fmt.Errorf("%s is reachable from other hosts and /state and /metrics show every tenant's pair rates: give a token (--http-token-file) or bind to loopback (127.0.0.1:PORT)", addr)
}

// requireToken serves h only to requests that carry the bearer token
// (none needed when token is empty: a loopback address).
func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bulkhead-agent"`)
			http.Error(w, "unauthorized: send the agent's HTTP token (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// MaxHTTPConns bounds the agent's HTTP server's open connections (the
// metrics and state of a busy host stay served, and a flood of
// connections cannot take its memory).
const MaxHTTPConns = 16

// httpAddr is where the agent's HTTP server listens: an address without a
// host ("":9100") is loopback — /state and per-pair metrics describe
// tenants, so other hosts reach them only where the operator says so
// (0.0.0.0:9100, or an address).
func httpAddr(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%q: expected IP:PORT: %w", s, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
