package orchestrator

// The orchestrator's Prometheus metrics.

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests    *prometheus.CounterVec
	inflight    prometheus.Gauge
	stageTime   *prometheus.HistogramVec
	lateDropped prometheus.Counter
	aborts      *prometheus.CounterVec
	abortDrain  prometheus.Histogram
	restarts    *prometheus.CounterVec
	// restartFailures counts failed attempts to restart a lost replica.
	restartFailures *prometheus.CounterVec
	// retries counts requests moved to another replica of a stage.
	retries *prometheus.CounterVec
	// migrations counts requests moved to another replica of a stage
	// after their replica was lost mid-stream, and those that could not
	// move, by stage and outcome.
	migrations *prometheus.CounterVec
	// batchSize and batchWait observe the batches of batching stages.
	batchSize  *prometheus.HistogramVec
	batchWait  *prometheus.HistogramVec
	collectors []prometheus.Collector
	// ok is requests' "ok" child, the common case, looked up once.
	ok prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "omnistage_requests_total",
			Help: "Requests that ended, or were refused at admission (overloaded, conflict), by outcome: ok, or an error code.",
		}, []string{"outcome"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "omnistage_requests_inflight",
			Help: "Requests admitted and not yet ended (draining ones included).",
		}),
		stageTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "omnistage_stage_duration_seconds",
			Help:    "Time one stage spent on one request.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}, []string{"stage"}),
		lateDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "omnistage_late_events_dropped_total",
			Help: "Outputs of ended or cancelled requests that were dropped instead of delivered.",
		}),
		aborts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "omnistage_aborts_total",
			Help: "Aborts by result: drained, or abort_failed when the drain outlasted the timeout.",
		}, []string{"result"}),
		abortDrain: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "omnistage_abort_drain_seconds",
			Help:    "Time from an abort to the end of its request's drain.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12),
		}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "omnistage_replica_restarts_total",
			Help: "Lost replicas replaced by a new one, by stage.",
		}, []string{"stage"}),
		restartFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "omnistage_replica_restart_failures_total",
			Help: "Attempts to replace a lost replica that failed and were retried, by stage.",
		}, []string{"stage"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "omnistage_stage_retries_total",
			Help: "Requests whose replica of the stage was lost before it took anything of them (a refused connection), moved to another replica, by stage.",
		}, []string{"stage"}),
		migrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "omnistage_migrations_total",
			Help: "Requests whose replica of a stage that can replay was lost mid-stream, by stage and outcome: migrated (the request went on on another replica), or why it failed: no_replica, queue_full, limit, unretained, diverged.",
		}, []string{"stage", "outcome"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "omnistage_batch_size",
			Help:    "Units of work (of one or more requests) computed in one call of a batching stage's engine, by stage.",
			Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64},
		}, []string{"stage"}),
		batchWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "omnistage_batch_wait_seconds",
			Help:    "How long the oldest unit of work of a batch waited for the batch to begin, by stage.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12),
		}, []string{"stage"}),
	}
	m.collectors = []prometheus.Collector{m.requests, m.inflight, m.stageTime, m.lateDropped, m.aborts, m.abortDrain, m.restarts, m.restartFailures, m.retries, m.migrations, m.batchSize, m.batchWait}
	m.ok = m.requests.WithLabelValues("ok")
	return m
}

// register adds the per-stage gauges of stages and registers every
// collector with reg, when it is not nil.
func (m *metrics) register(reg prometheus.Registerer, stages []*stageRun) error {
	for _, st := range stages {
		p := st.pool
		id := strconv.Itoa(st.id)
		// The restart counters of every stage are exported from zero.
		m.restarts.WithLabelValues(id)
		m.restartFailures.WithLabelValues(id)
		m.retries.WithLabelValues(id)
		if st.migrate && st.driverReplay != nil {
			m.migrations.WithLabelValues(id, migrated)
		}
		labels := prometheus.Labels{"stage": id}
		m.collectors = append(m.collectors,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "omnistage_stage_queue_depth", Help: "Requests waiting for a replica of the stage.", ConstLabels: labels,
			}, func() float64 { return float64(p.Stats().Queued) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "omnistage_stage_bindings", Help: "Requests bound to a replica of the stage.", ConstLabels: labels,
			}, func() float64 { return float64(p.Stats().Bindings) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "omnistage_stage_healthy_replicas", Help: "Replicas of the stage in service.", ConstLabels: labels,
			}, func() float64 { return float64(p.Stats().Healthy) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "omnistage_stage_replicas", Help: "Replicas of the stage, in service or lost: for a remote stage, one per address its endpoints resolve to.", ConstLabels: labels,
			}, func() float64 { return float64(p.Stats().Replicas) }),
		)
	}
	if reg != nil {
		for _, c := range m.collectors {
			if err := reg.Register(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range m.collectors {
		reg.Unregister(c)
	}
}
