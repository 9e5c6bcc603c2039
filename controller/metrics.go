package controller

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the controller's Prometheus metrics (bulkhead_controller_*).
type metrics struct {
	leader   prometheus.Gauge
	applied  *prometheus.CounterVec
	deleted  *prometheus.CounterVec
	requests *prometheus.CounterVec
	agents   prometheus.Gauge
	reports  prometheus.Counter
	// refused counts reports refused (agents.go: report).
	refused prometheus.Counter
	// tooLarge counts snapshots not sent for their size (snapshotFor).
	tooLarge prometheus.Counter
}

func newMetrics(reg *prometheus.Registry) metrics {
	m := metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "bulkhead_controller_leader",
			Help: "1 while this controller leads (takes writes), 0 while it follows."}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkhead_controller_applied_total",
			Help: "Objects applied, by kind and action (created, configured, unchanged)."}, []string{"kind", "action"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkhead_controller_deleted_total",
			Help: "Objects deleted, by kind."}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bulkhead_controller_api_requests_total",
			Help: "Operator API requests, by operation and HTTP status code."}, []string{"op", "code"}),
		agents: prometheus.NewGauge(prometheus.GaugeOpts{Name: "bulkhead_controller_agents_connected",
			Help: "Host agents with a session to this controller."}),
		reports: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_controller_agent_reports_total",
			Help: "Reports received from host agents and taken."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_controller_agent_reports_refused_total",
			Help: "Reports from host agents refused, none of their content taken: beyond the bounds, a rate not finite and non-negative, or naming a VM not on the reporting host (the agent's session ends; the log names the host and the entry)."}),
		tooLarge: prometheus.NewCounter(prometheus.CounterOpts{Name: "bulkhead_controller_snapshots_too_large_total",
			Help: "Host snapshots not sent because they are larger than an agent receives (4 MiB): the host's agent keeps its previous model (the log names the host and the size)."}),
	}
	reg.MustRegister(m.leader, m.applied, m.deleted, m.requests, m.agents, m.reports, m.refused, m.tooLarge,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// The leader's view of the running cluster, per tenant, host and
// appliance (clusterCollector). deploy/prometheus/bulkhead-rules.yaml
// alerts on them; TestClusterMetrics checks the names and labels it uses.
var (
	descTenantGuarantee = prometheus.NewDesc("bulkhead_controller_tenant_guarantee_bps",
		"A tenant's guarantee: the sum of its VMs' receive guarantees (bits/s).", []string{"tenant"}, nil)
	descTenantAchieved = prometheus.NewDesc("bulkhead_controller_tenant_achieved_bps",
		"What a tenant's VMs received in the agents' latest reports (bits/s); absent while no VM of the tenant has a fresh report.", []string{"tenant"}, nil)
	descTenantBelow = prometheus.NewDesc("bulkhead_controller_tenant_below_guarantee",
		"1 if, in the latest compliance interval, a VM of the tenant received less than 95% of its guarantee while a limiter or a full link into its host held it back (the compliance rule of `bulkhead get tenants`), else 0; absent while no VM of the tenant has a fresh report.", []string{"tenant"}, nil)
	descTenantIntervals = prometheus.NewDesc("bulkhead_controller_tenant_intervals_total",
		"Compliance intervals in which the tenant was judged (some VM had a fresh report).", []string{"tenant"}, nil)
	descTenantCompliant = prometheus.NewDesc("bulkhead_controller_tenant_compliant_intervals_total",
		"Compliance intervals in which the tenant got its guarantees (below_guarantee was 0).", []string{"tenant"}, nil)
	descAgentConnected = prometheus.NewDesc("bulkhead_controller_agent_connected",
		"1 while a declared host's agent has a session to this (leading) controller, else 0.", []string{"host"}, nil)
	descAgentLastReport = prometheus.NewDesc("bulkhead_controller_agent_last_report_timestamp_seconds",
		"When a declared host's agent last reported to this controller (Unix seconds); absent until it first reports.", []string{"host"}, nil)
	descAgentLimitFailures = prometheus.NewDesc("bulkhead_controller_agent_limit_failures_total",
		"Limiter and scheduler writes the host's data path refused, as its agent last reported (since the agent started).", []string{"host"}, nil)
	descApplianceEstimate = prometheus.NewDesc("bulkhead_controller_appliance_capacity_estimate",
		"The central controller's capacity estimate of an appliance at its latest step (tokens/s).", []string{"appliance"}, nil)
)

// tenantView is what the latest compliance interval saw of a tenant.
type tenantView struct {
	guarantee float64
	achieved  float64
	counted   bool // some VM had a fresh report: achieved and below mean something
	below     bool
}

// clusterCollector exports the leader's view of tenants, hosts and
// appliances. A follower exports none of it (it has no reports), and
// objects no longer declared leave with the next compliance interval or
// central step.
type clusterCollector struct{ c *Controller }

func (cc clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTenantGuarantee, descTenantAchieved, descTenantBelow, descTenantIntervals,
		descTenantCompliant, descAgentConnected, descAgentLastReport, descAgentLimitFailures, descApplianceEstimate} {
		ch <- d
	}
}

func (cc clusterCollector) Collect(ch chan<- prometheus.Metric) {
	c := cc.c
	if lead, _ := c.Leading(); !lead {
		return
	}
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	c.rt.mu.Lock()
	for name, v := range c.rt.view {
		ch <- prometheus.MustNewConstMetric(descTenantGuarantee, prometheus.GaugeValue, v.guarantee, name)
		if v.counted {
			ch <- prometheus.MustNewConstMetric(descTenantAchieved, prometheus.GaugeValue, v.achieved, name)
			ch <- prometheus.MustNewConstMetric(descTenantBelow, prometheus.GaugeValue, b(v.below), name)
		}
		if tc := c.rt.tenants[name]; tc != nil {
			ch <- prometheus.MustNewConstMetric(descTenantIntervals, prometheus.CounterValue, float64(tc.intervals), name)
			ch <- prometheus.MustNewConstMetric(descTenantCompliant, prometheus.CounterValue, float64(tc.compliant), name)
		}
	}
	for _, host := range c.rt.declared {
		h := c.rt.hosts[host]
		ch <- prometheus.MustNewConstMetric(descAgentConnected, prometheus.GaugeValue, b(h != nil && h.connected), host)
		if h == nil {
			continue
		}
		if !h.lastReport.IsZero() {
			ch <- prometheus.MustNewConstMetric(descAgentLastReport, prometheus.GaugeValue,
				float64(h.lastReport.UnixNano())/1e9, host)
		}
		if h.stats != nil {
			ch <- prometheus.MustNewConstMetric(descAgentLimitFailures, prometheus.CounterValue, float64(h.stats.LimitFailures), host)
		}
	}
	c.rt.mu.Unlock()
	c.cen.mu.Lock()
	est := maps.Clone(c.cen.estimates)
	c.cen.mu.Unlock()
	for _, a := range slices.Sorted(maps.Keys(est)) {
		ch <- prometheus.MustNewConstMetric(descApplianceEstimate, prometheus.GaugeValue, est[a], a)
	}
}
