package metrickit

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Registering the same collector twice on one registry is fine; a
// different collector with a clashing name is an error.
func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	if err := Register(reg, c); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg, c); err != nil {
		t.Fatalf("second registration: %v", err)
	}
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "y"})
	if err := Register(reg, clash); err == nil {
		t.Fatal("a clashing collector registered")
	}
	if err := Register(nil, c); err != nil {
		t.Fatal(err)
	}
}

// A Counter's metric carries its count and labels.
func TestCounterMetric(t *testing.T) {
	var c Counter
	c.Inc()
	c.Inc()
	desc := prometheus.NewDesc("y_total", "y", []string{"rule"}, nil)
	m := c.Metric(desc, "r1")
	if c.Load() != 2 || !strings.Contains(m.Desc().String(), `"y_total"`) {
		t.Fatalf("count %d, desc %s", c.Load(), m.Desc())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) { ch <- c.Metric(desc, "r1") }, desc))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if got := mfs[0].GetMetric()[0]; got.GetCounter().GetValue() != 2 || got.GetLabel()[0].GetValue() != "r1" {
		t.Fatalf("gathered %v", got)
	}
}

type collector struct {
	fn   func(chan<- prometheus.Metric)
	desc *prometheus.Desc
}

func collectorFunc(fn func(chan<- prometheus.Metric), d *prometheus.Desc) prometheus.Collector {
	return collector{fn, d}
}
func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collector) Collect(ch chan<- prometheus.Metric) { c.fn(ch) }

// A StripedCounter's count is the sum of what went to every stripe, any
// stripe index taken modulo Stripes; its metric carries that sum.
func TestStripedCounter(t *testing.T) {
	var c StripedCounter
	for i := -3; i < 2*Stripes; i++ {
		c.Add(i, 2)
	}
	const want = 2 * (2*Stripes + 3)
	if c.Load() != want {
		t.Fatalf("count %d, want %d", c.Load(), want)
	}
	desc := prometheus.NewDesc("z_total", "z", []string{"rule"}, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) { ch <- c.Metric(desc, "r1") }, desc))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if got := mfs[0].GetMetric()[0].GetCounter().GetValue(); got != want {
		t.Fatalf("gathered %v, want %d", got, want)
	}
}
