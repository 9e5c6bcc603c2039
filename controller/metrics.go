package controller

import (
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
			Help: "Reports received from host agents."}),
	}
	reg.MustRegister(m.leader, m.applied, m.deleted, m.requests, m.agents, m.reports,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
