// Package docs_test checks the user docs against the code: the metrics
// reference table against the metrics the handlers register.
package docs_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	_ "github.com/sluicegw/sluice"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// metricsTable is the page that holds the one metrics table.
const metricsTable = "operations.md"

// allHandlers provisions one handler of each package (and the store),
// which registers every collector on the config's registry.
const allHandlers = `{
	%s
	rulestore {
		rate_limit api {
			qps 10
			burst 10
		}
	}
}
http://127.0.0.1:%d {
	ratelimit api
	circuitbreaker {
		failure_threshold 5
		open_duration 30s
	}
	grayroute {
		gray canary {
			target_version v2
			fallback_version v1
			weight 10
		}
	}
	respond "ok"
}
`

// docRow is one row of the metrics table: the metric and its labels.
type docRow struct {
	labels string // sorted, comma-separated
	text   string
	line   int
}

// documentedMetrics reads the first table under "## Metrics" of file.
func documentedMetrics(t *testing.T, file string) map[string]docRow {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]docRow{}
	in, n := false, 0
	name := regexp.MustCompile("^\\| `(sluice_[a-z_]+)` \\|")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Metrics"
		case in && name.MatchString(line):
			cells := strings.Split(line, "|")
			if len(cells) < 5 {
				t.Fatalf("%s:%d: want | metric | type | labels | meaning |: %s", file, n, line)
			}
			var labels []string
			for _, l := range strings.Split(cells[3], ",") {
				if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
					labels = append(labels, l)
				}
			}
			slices.Sort(labels)
			m := name.FindStringSubmatch(line)[1]
			if _, dup := out[m]; dup {
				t.Errorf("%s:%d: %s listed twice", file, n, m)
			}
			out[m] = docRow{labels: strings.Join(labels, ","), text: line, line: n}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)

// registeredMetrics are the metrics registered on the running config's
// registry, by name, with their labels.
func registeredMetrics(t *testing.T) map[string]string {
	t.Helper()
	ctx := caddy.ActiveContext()
	reg := ctx.GetMetricsRegistry()
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	out := map[string]string{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		if !strings.HasPrefix(m[1], "sluice_") {
			continue // Caddy's own
		}
		labels := strings.Split(m[2], ",")
		if m[2] == "" {
			labels = nil
		}
		slices.Sort(labels)
		out[m[1]] = strings.Join(labels, ",")
	}
	return out
}

// TestMetricsTableMatchesRegistry: the metrics table lists every metric the
// handlers and the store register, with its labels, and no other; no other
// page repeats a metrics table.
func TestMetricsTableMatchesRegistry(t *testing.T) {
	testcaddy.Run(t, fmt.Sprintf(allHandlers, testcaddy.Options(t), testcaddy.FreePort(t)))
	got := registeredMetrics(t)
	doc := documentedMetrics(t, metricsTable)
	if len(got) < 20 {
		t.Fatalf("only %d sluice metrics registered: is the config missing a handler?", len(got))
	}
	for name, labels := range got {
		row, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s: %s {%s} is registered, not in the table", metricsTable, name, labels)
		case row.labels != labels:
			t.Errorf("%s:%d: %s labels {%s}, registered {%s}", metricsTable, row.line, name, row.labels, labels)
		}
	}
	for name, row := range doc {
		if _, ok := got[name]; !ok {
			t.Errorf("%s:%d: %s is in the table, not registered", metricsTable, row.line, name)
		}
	}
	t.Logf("%d metrics registered, %d rows in %s", len(got), len(doc), metricsTable)

	// The values of the enumerated labels a scrape shows are named in
	// their row (a rule's series exist at 0 from provisioning).
	ctx := caddy.ActiveContext()
	fams, err := ctx.GetMetricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	enumerated := map[string]bool{"result": true, "state": true, "to": true, "mode": true, "outcome": true, "test": true}
	seen := 0
	for _, f := range fams {
		row, ok := doc[f.GetName()]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if enumerated[l.GetName()] {
					seen++
					if !strings.Contains(row.text, "`"+l.GetValue()+"`") {
						t.Errorf("%s:%d: %s{%s=%q} is exported, its row does not name `%s`",
							metricsTable, row.line, f.GetName(), l.GetName(), l.GetValue(), l.GetValue())
					}
				}
			}
		}
	}
	if seen < 10 {
		t.Errorf("only %d enumerated label values scraped: want the rules' series at 0", seen)
	}

	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `sluice_[a-z_]+")
	for _, p := range pages {
		if p == metricsTable {
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if row.MatchString(line) {
				t.Errorf("%s:%d: a metrics table row; the table is in %s: link to it", p, i+1, metricsTable)
			}
		}
	}
}
