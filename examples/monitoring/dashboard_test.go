package monitoring_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// exported maps each metric name of a scrape to its label names.
type exported map[string]map[string]bool

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	labelName  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
)

// parseScrape reads Prometheus's text format.
func parseScrape(text string) exported {
	out := exported{}
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if out[m[1]] == nil {
			out[m[1]] = map[string]bool{}
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			out[m[1]][l[1]] = true
		}
	}
	return out
}

var (
	queriedMetric = regexp.MustCompile(`\bsluice_[a-z0-9_]+\b`)
	matcher       = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	grouping      = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
)

// targetLabels are added by Prometheus to every scraped series.
var targetLabels = map[string]bool{"job": true, "instance": true}

// checkQuery reports the metrics expr queries that the scrape lacks, and
// the labels it matches or groups by that none of its metrics carries.
func checkQuery(t *testing.T, where, expr string, scrape exported) {
	t.Helper()
	names := queriedMetric.FindAllString(expr, -1)
	if len(names) == 0 && !strings.Contains(expr, "sluice:") {
		t.Errorf("%s: queries no Sluice metric: %s", where, expr)
	}
	have := map[string]bool{}
	for _, n := range names {
		labels, ok := scrape[n]
		if !ok {
			t.Errorf("%s: metric %s is not exported by Caddy (query %s)", where, n, expr)
			continue
		}
		for l := range labels {
			have[l] = true
		}
	}
	if len(names) == 0 {
		return // a query of recorded series: rules.yml is checked too
	}
	var used []string
	for _, m := range matcher.FindAllStringSubmatch(expr, -1) {
		used = append(used, m[1])
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				used = append(used, l)
			}
		}
	}
	for _, l := range used {
		if !have[l] && !targetLabels[l] {
			t.Errorf("%s: label %s is on none of %v (query %s)", where, l, names, expr)
		}
	}
}

// scrapeAllHandlers runs the three handlers with traffic through each
// (a refusal, an open breaker, a judged canary interval) and returns
// Caddy's /metrics.
func scrapeAllHandlers(t *testing.T) exported {
	s := startCaddy(t, "")
	for i := 0; i < 3; i++ {
		testcaddy.Get(t, s.gateway+"/quota")
		testcaddy.Get(t, s.gateway+"/tight")
		testcaddy.Get(t, s.gateway+"/flaky")
	}
	var body string
	testcaddy.Eventually(t, 20*time.Second, "a judged canary interval in /metrics", func() bool {
		for u := 0; u < 20; u++ {
			testcaddy.Get(t, s.gateway+"/canary", "X-User-Id: u"+string(rune('a'+u)))
		}
		_, body = testcaddy.Get(t, s.admin+"/metrics")
		return strings.Contains(body, "sluice_grayroute_analysis_intervals_total{")
	})
	return parseScrape(body)
}

// dashboardQueries lists every panel target's expression and the
// template variables' queries of dashboard.json.
func dashboardQueries(t *testing.T) map[string]string {
	var d struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name  string
				Query json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(readFile(t, "dashboard.json")), &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			out["panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		var q struct{ Query string }
		if json.Unmarshal(v.Query, &q) == nil && q.Query != "" {
			out["variable "+v.Name] = q.Query
		}
	}
	return out
}

var exprLine = regexp.MustCompile(`(?s)expr: (\|\n.*?\n\s*(?:for|labels|annotations|- record|- alert):|[^\n]+)`)

// TestDashboardAndRulesQueryExportedMetrics: every metric and label the
// dashboard and rules.yml query is in a real scrape of a real Caddy with
// all three handlers.
func TestDashboardAndRulesQueryExportedMetrics(t *testing.T) {
	scrape := scrapeAllHandlers(t)
	queries := dashboardQueries(t)
	if len(queries) < 20 {
		t.Fatalf("dashboard.json: %d queries, want the 20 and more it has", len(queries))
	}
	// The dashboard shows each part: rate limits, breakers, canaries, store.
	var all []string
	for where, q := range queries {
		checkQuery(t, "dashboard.json "+where, q, scrape)
		all = append(all, q)
	}
	for _, m := range []string{"sluice_ratelimit_requests_total", "sluice_circuitbreaker_state", "sluice_grayroute_requests_total",
		"sluice_grayroute_analysis_intervals_total", "sluice_grayroute_canary_state", "sluice_rulestore_redis_connected",
		"sluice_rulestore_propagation_delay_seconds_bucket", "sluice_rules_invalid"} {
		if !slices.ContainsFunc(all, func(q string) bool { return strings.Contains(q, m) }) {
			t.Errorf("dashboard.json does not show %s", m)
		}
	}
	exprs := exprLine.FindAllStringSubmatch(readFile(t, "rules.yml"), -1)
	if len(exprs) != 12 {
		t.Fatalf("rules.yml: found %d expressions, want 12", len(exprs))
	}
	for i, m := range exprs {
		checkQuery(t, "rules.yml expression "+string(rune('1'+i)), m[1], scrape)
	}
}
