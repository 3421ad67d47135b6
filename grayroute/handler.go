package grayroute

import (
	"fmt"
	"net/http"
	"net/textproto"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/internal/metrickit"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// VarName is the Caddy variable holding the decided version, readable as
// {http.vars.gray_version} and by the vars matcher.
const VarName = "gray_version"

// Defaults.
const (
	DefaultVersion = "v1"
	DefaultHeader  = "X-Target-Version"
)

// Handler decides which version serves a request. Rules are evaluated in
// order; the first whose tag matches decides between its target and fallback
// versions. A request that matches no rule gets DefaultVersion.
type Handler struct {
	// Rules in evaluation order: ids of gray rules in the rule store, or
	// inline rules (an id with fields).
	Rules []RuleRef `json:"rules,omitempty"`
	// Route takes the ordered gray list of a route binding instead of Rules.
	Route string `json:"route,omitempty"`
	// DefaultVersion for requests no rule matches (default v1).
	DefaultVersion string `json:"default_version,omitempty"`
	// Header is the request header that carries the version to the upstream
	// (default X-Target-Version); "off" sets none.
	Header string `json:"header,omitempty"`
	// OnMissingRule: a request while a gray rule of the list (or the
	// route binding) is missing passes over it (pass, the default) or is
	// refused with 503 (refuse).
	OnMissingRule string `json:"on_missing_rule,omitempty"`

	store      *rulestore.App
	logger     *zap.Logger
	header     string    // canonical, "" when off
	noMatch    *decision // a request no rule matched: DefaultVersion
	inline     []*Rule   // parallel to Rules; nil for store references
	inlineIDs  []string  // the ids of inline, held in metrics.inline
	defaultCtr *metrickit.Counter
	now        func() time.Time
	coarse     bool // records read the store's RecordClock, not now (weights_glue.go)
	isOpen     func(ruleID, key string) bool
	hub        *analysisHub                                     // canary analysis (analysis_hub.go)
	adapted    handlerkit.Adapted                               // while the Caddyfile is adapted
	rules      *handlerkit.RuleList[*Rule, struct{}, heldRules] // handles.go
}

// RuleRef is one entry of a handler's rule list: the id of a gray rule of
// the rule store, or an inline rule with its id. A rule of the same id in
// the rule store (from Redis) replaces an inline one while it exists.
type RuleRef = handlerkit.RuleRef[*rulestore.GraySpec]

func init() {
	caddy.RegisterModule(new(Handler))
}

// CaddyModule returns the Caddy module information.
func (*Handler) CaddyModule() caddy.ModuleInfo {
	return handlerkit.ModuleInfo[Handler]("http.handlers.grayroute")
}

// Provision resolves the rule store, parses inline rules and registers metrics.
func (h *Handler) Provision(ctx caddy.Context) error {
	store, err := rulestore.Get(ctx)
	if err != nil {
		return err
	}
	if err := h.setup(store, ctx.GetMetricsRegistry(), ctx.Logger()); err != nil {
		return err
	}
	for _, g := range h.inline {
		if g != nil && g.FallbackOnOpen != "" {
			if err := store.Require(rulestore.CircuitBreaker, g.FallbackOnOpen); err != nil {
				return fmt.Errorf("inline gray rule %q: fallback_on_open: %w", g.ID, err)
			}
		}
	}
	return nil
}

// setup is Provision without a Caddy context, so tests and benchmarks can
// build a handler on a bare store.
func (h *Handler) setup(store *rulestore.App, reg *prometheus.Registry, logger *zap.Logger) error {
	h.store, h.logger = store, logger
	if h.now == nil {
		h.now, h.coarse = time.Now, true
	}
	if h.isOpen == nil {
		h.isOpen = store.Breakers().IsOpen
	}
	if h.DefaultVersion == "" {
		h.DefaultVersion = DefaultVersion
	}
	if h.Header == "" {
		h.Header = DefaultHeader
	}
	if h.Header != "off" {
		h.header = textproto.CanonicalMIMEHeaderKey(h.Header)
	}
	h.noMatch = newDecision(h.DefaultVersion, "")

	chosen, err := h.selection().Provision(store, rulestore.Gray, "grayroute",
		func(b *rulestore.RouteBinding) []string { return b.Gray })
	if err != nil {
		return err
	}
	h.inline = make([]*Rule, len(chosen.List))
	for i, c := range chosen.List {
		if c.Rule != nil {
			h.inline[i] = c.Rule.(*Rule)
			h.inlineIDs = append(h.inlineIDs, c.ID)
		}
	}
	metrics.inline.hold(h.inlineIDs)

	if err := registerMetrics(reg); err != nil {
		return err
	}
	h.defaultCtr = metrics.requests.WithLabelValues("", h.DefaultVersion)
	h.holdRules()
	h.recordSplits(store)
	return h.attachHub(store, reg, logger)
}

// Validate checks the configuration.
func (h *Handler) Validate() error {
	if err := ValidVersion(h.DefaultVersion); err != nil {
		return fmt.Errorf("default_version: %v", err)
	}
	if h.Header != "off" && !syntax.ValidHeaderName(h.Header) {
		return fmt.Errorf("header: %q is not a valid header name", h.Header)
	}
	return h.selection().Validate("grayroute", rulestore.Gray)
}

// selection hands Rules, Route and OnMissingRule to the rule selection the
// handlers share.
func (h *Handler) selection() *handlerkit.Selection[*rulestore.GraySpec] {
	return &handlerkit.Selection[*rulestore.GraySpec]{Rules: h.Rules, Route: h.Route,
		OnMissing: handlerkit.OnMissing{OnMissingRule: h.OnMissingRule}}
}

// ServeHTTP decides the version, hands it over and calls the next handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.OnMissingRule == handlerkit.MissingRefuse {
		if held := h.current(); held.missing.id != "" {
			return handlerkit.RefuseMissing("grayroute", held.missing.kind, held.missing.id)
		}
	}
	d, cohort := h.decide(r)
	ctx := r.Context()
	vars, _ := ctx.Value(caddyhttp.VarsCtxKey).(map[string]any)
	if vars != nil {
		vars[VarName] = d.versionAny // as caddyhttp.SetVar, without a second lookup
	}
	repl, _ := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	pub := handlerkit.PlaceholdersIn(repl, vars)
	handlerkit.Publish(pub, handlerkit.GrayRoute, d, placeholderNames)
	if span := pub.Span(ctx); span != nil {
		handlerkit.AddDecision(span, d, spanAttrs)
	}
	if h.header != "" {
		// Overwrites whatever the client sent: the version is never trusted
		// from the request, in its headers or its trailers.
		r.Header[h.header] = []string{d.version}
		stripTrailer(r, h.header)
	}
	if cohort != nil {
		return h.serveCounted(w, r, next, cohort)
	}
	return next.ServeHTTP(w, r)
}

// decision is what a request is told: its version, and the values of its
// {http.grayroute.*} placeholders (the version and the deciding rule's id,
// "" when none matched), boxed for Caddy once per rule and outcome, so
// handing them to the vars, the replacer (handlerkit.Publish: as a
// pointer, it goes into the replacer's slot without allocating) and a span
// allocates nothing per request.
type decision struct {
	version             string
	versionAny, ruleAny any
}

func newDecision(version, rule string) *decision {
	return &decision{version: version, versionAny: version, ruleAny: rule}
}

var placeholderNames = []string{"http.grayroute.version", "http.grayroute.rule"}

// spanAttrs record the decision on a recording span: sluice.grayroute.version, .rule.
var spanAttrs = handlerkit.SpanAttrs(placeholderNames...)

// Placeholder answers one {http.grayroute.*} placeholder.
func (d *decision) Placeholder(name string) (any, bool) {
	switch name {
	case "http.grayroute.version":
		return d.versionAny, true
	case "http.grayroute.rule":
		return d.ruleAny, true
	}
	return nil, false
}

// decide returns the decision for r and, for a request of a canary
// analysis, the counters of its cohort.
func (h *Handler) decide(r *http.Request) (*decision, *cohortCounts) {
	q := request{Request: r}
	if g := h.match(&q); g != nil {
		return h.apply(g, r)
	}
	h.defaultCtr.Inc()
	return h.noMatch, nil
}

// apply splits a matching request between the rule's target and fallback.
func (h *Handler) apply(g *Rule, r *http.Request) (*decision, *cohortCounts) {
	s := g.split(r, g.Threshold(h.now), true)
	canary, random := s.canary, s.random
	forced := false
	if random {
		metrics.random.WithLabelValues(g.ID).Inc()
		if ce := h.logger.Check(zapcore.DebugLevel, "no hash key resolved; version chosen at random"); ce != nil {
			ce.Write(zap.String("rule", g.ID), zap.String("hash_key", g.HashKey.String()))
		}
	}
	if canary && g.FallbackOnOpen != "" && h.isOpen(g.FallbackOnOpen, g.Target) {
		canary, forced = false, true
	}
	fallback := g.toFallback
	if fallback == nil {
		fallback = g.fallbackTo(h.DefaultVersion)
	}
	ctrs := g.countersFor(fallback.version)
	h.recordSplit(g, s, forced)
	if canary {
		ctrs.target.Inc()
		return g.toTarget, h.cohort(g, true, forced)
	}
	ctrs.fallback.Inc()
	return fallback, h.cohort(g, false, forced)
}

var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
