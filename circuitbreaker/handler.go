package circuitbreaker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// Handler guards the rest of the route with a circuit breaker: exactly one
// of rule, route and inline names the rule.
type Handler struct {
	// Rule is the id of the circuit_breaker rule, in the rule store, that
	// this handler applies.
	Rule string `json:"rule,omitempty"`
	// Route names a route binding of the rule store; its circuit_breaker
	// field names the rule, followed live as it changes.
	Route string `json:"route,omitempty"`
	// Inline declares the rule in place, with the rule store's field
	// names. Its optional "id" names it (labels, events, the breaker's
	// state); handlers giving the same id share one breaker. Without one
	// its id is inline:<hash of the fields>; the Caddyfile adapter writes
	// inline:<hash>-2, -3... into later identical blocks, and in JSON two
	// identical blocks without an id are an error.
	Inline *rulestore.CircuitBreakerSpec `json:"inline,omitempty"`
	// OnMissingRule is pass (the default: while a named rule or route
	// binding does not exist, requests go on unguarded and it is warned
	// about) or refuse (503 Service Unavailable until it exists).
	OnMissingRule string `json:"on_missing_rule,omitempty"`

	store  *rulestore.App
	inline *Rule
	holder *handlerkit.Holder[*ruleState]
	// last is the state of the rule the last request ran under, so a
	// request under the same rule finds it without the holder's lookup.
	last    atomic.Pointer[heldState]
	logger  *zap.Logger
	adapted handlerkit.Adapted                    // while the Caddyfile is adapted
	sel     *handlerkit.Selector[*Rule, struct{}] // for Rule and Route
	// writers are the requests' status writers, reused: one allocation
	// per request fewer than a new writer each.
	writers sync.Pool
}

// heldState is a rule and its breakers' state.
type heldState struct {
	rule *Rule
	st   *ruleState
}

// stateOf is the held state of rule's id: the last request's while the
// rule is the same, else looked up (by id) and kept for the next.
func (h *Handler) stateOf(rule *Rule) *ruleState {
	if l := h.last.Load(); l != nil && l.rule == rule {
		return l.st
	}
	st := h.holder.Get(rule.ID)
	h.last.Store(&heldState{rule: rule, st: st})
	return st
}

func init() {
	caddy.RegisterModule(new(Handler))
}

// CaddyModule returns the Caddy module information.
func (*Handler) CaddyModule() caddy.ModuleInfo {
	return handlerkit.ModuleInfo[Handler]("http.handlers.circuitbreaker")
}

// Provision loads the rule store, parses an inline rule and registers the
// metrics.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	store, err := rulestore.Get(ctx)
	if err != nil {
		return err
	}
	h.store = store
	if err := h.Validate(); err != nil {
		return err
	}
	sel := h.selection()
	chosen, err := sel.Provision(store, rulestore.CircuitBreaker, "circuitbreaker",
		func(b *rulestore.RouteBinding) []string { return nonEmpty(b.CircuitBreaker) })
	if err != nil {
		return err
	}
	if chosen.Inline != nil {
		h.inline = chosen.Inline.Rule.(*Rule)
	} else {
		h.sel = handlerkit.NewSelector[*Rule](store, rulestore.CircuitBreaker, sel,
			func(b *rulestore.RouteBinding) string { return b.CircuitBreaker },
			func(string) struct{} { return struct{}{} })
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	store.SetPreviewer(rulestore.CircuitBreaker, callsPreviewer{store: store})
	h.holder = shared.Holder(newRuleState)
	if cs := statesOf(store); cs != nil {
		h.holder.OnHold(cs.add)
	}
	// Take hold of the rule's state now, while the previous config still
	// holds it, so a reload keeps the breakers.
	if id := h.ruleID(); id != "" {
		h.holder.Get(id)
	}
	return nil
}

// nonEmpty is id as a list: none when "".
func nonEmpty(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

// Validate checks that exactly one rule source is given, well formed.
func (h *Handler) Validate() error {
	return h.selection().Validate("circuitbreaker", rulestore.CircuitBreaker)
}

// selection hands Rule, Route, Inline and OnMissingRule to the rule
// selection the handlers share.
func (h *Handler) selection() *handlerkit.Selection[*rulestore.CircuitBreakerSpec] {
	return &handlerkit.Selection[*rulestore.CircuitBreakerSpec]{Rule: h.Rule, Route: h.Route, Inline: h.Inline,
		OnMissing: handlerkit.OnMissing{OnMissingRule: h.OnMissingRule}}
}

// ruleID is the id of the rule in force, if it is known at provision time.
func (h *Handler) ruleID() string {
	if h.inline != nil {
		return h.inline.ID
	}
	return h.sel.RuleID()
}

// Cleanup releases this config's hold on the shared breakers.
func (h *Handler) Cleanup() error {
	if h.holder != nil {
		h.holder.Release()
	}
	return nil
}

// rule returns the rule in force for this request, or nil to pass through.
func (h *Handler) rule() *Rule {
	if h.inline != nil {
		return h.inline
	}
	r, _, _ := h.sel.Current()
	return r
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	pub := handlerkit.PlaceholdersOf(r, repl)
	handlerkit.EmptyPlaceholders(pub)
	rule := h.rule()
	if rule == nil {
		if err := h.sel.Refusal("circuitbreaker"); err != nil {
			return err
		}
		return next.ServeHTTP(w, r)
	}
	st := h.stateOf(rule)
	st.use(rule)
	if st.mode(rule) == ModeDisabled {
		return next.ServeHTTP(w, r)
	}

	// With a key, the breaker is the key value's; a key that is still empty
	// (set by a later handler, e.g. grayroute's {http.vars.gray_version}) is
	// resolved again once the call is done.
	b := st.def
	if rule.Key != "" {
		if repl != nil {
			b = st.forKey(repl.ReplaceKnown(rule.Key, ""))
		}
	}
	keyLater := rule.Key != "" && repl != nil && b == st.def

	clk := startCall(rule.SlowCallDuration > 0, h.store.RecordClock())
	ticket, ok, retryAfter := b.Allow()
	if !ok {
		st.recordCall(b, clk.at, 0, callRefused)
		st.metrics.rejected.Inc()
		return h.reject(w, r, pub, rule, b, retryAfter)
	}

	if span := pub.Span(r.Context()); span != nil {
		traceState(span, rule.ID, b.State().String())
	}

	sw, _ := h.writers.Get().(*handlerkit.StatusWriter)
	if sw == nil {
		sw = new(handlerkit.StatusWriter)
	}
	*sw = handlerkit.StatusWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
	done := false
	record := func(o Outcome) {
		lat := clk.latency()
		slow := rule.SlowCallDuration > 0 && lat >= rule.SlowCallDuration
		if keyLater {
			if kb := st.forKey(repl.ReplaceKnown(rule.Key, "")); kb != b {
				b.Record(ticket, Ignored, false)
				kb.Observe(o, slow)
				st.metrics.calls[o].Inc()
				st.recordCall(kb, clk.at, lat, callOutcome(o))
				return
			}
		}
		b.Record(ticket, o, slow)
		st.metrics.calls[o].Inc()
		st.recordCall(b, clk.at, lat, callOutcome(o))
	}
	// A panic below still records its outcome, exactly once, then goes on.
	defer func() {
		if !done {
			record(failureUnlessCanceled(r))
		}
	}()
	err := next.ServeHTTP(sw, r)
	done = true
	record(outcome(r, rule, sw.Status, err))
	// Back to the pool only when the handlers below returned: after a
	// panic one may still hold it.
	*sw = handlerkit.StatusWriter{}
	h.writers.Put(sw)
	return err
}

// outcome classifies a finished call.
func outcome(r *http.Request, rule *Rule, status int, err error) Outcome {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return Ignored // the client went away: not the downstream's fault
	}
	if err != nil {
		code := http.StatusInternalServerError
		var he caddyhttp.HandlerError
		if errors.As(err, &he) && he.StatusCode != 0 {
			code = he.StatusCode
		}
		// Errors are dial failures, timeouts, 502/503/504 from
		// reverse_proxy...; a 4xx error (e.g. a missing file) is not.
		if code >= 500 || rule.Failures.Has(code) {
			return failureUnlessRejected(r)
		}
		return Success
	}
	if rule.Failures.Has(status) {
		return failureUnlessRejected(r)
	}
	return Success
}

// rejectedVar marks a request another breaker further down refused: its
// open response is that breaker's verdict, not a downstream failure.
const rejectedVar = "circuitbreaker_rejected"

func failureUnlessRejected(r *http.Request) Outcome {
	if caddyhttp.GetVar(r.Context(), rejectedVar) != nil {
		return Ignored
	}
	return Failure
}

func failureUnlessCanceled(r *http.Request) Outcome {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return Ignored
	}
	return Failure
}

// reject writes the open response, or hands the request to handle_errors.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, pub handlerkit.Placeholders, rule *Rule, b *Breaker, retryAfter time.Duration) error {
	state := b.State().String()
	if state == "closed" {
		state = "ramping"
	}
	caddyhttp.SetVar(r.Context(), rejectedVar, rule.ID)
	traceDecision(r.Context(), pub, rule.ID, state)
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl != nil {
		repl.Set("http.circuitbreaker.state", state)
		repl.Set("http.circuitbreaker.rule", rule.ID)
	}
	if retryAfter > 0 {
		secs := (retryAfter + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
	}
	if rule.HandleErrors {
		return caddyhttp.Error(rule.Status, fmt.Errorf("circuit breaker %s is %s", rule.ID, state))
	}
	hdr := w.Header()
	for name, vals := range rule.Headers {
		for _, v := range vals {
			if repl != nil {
				v = repl.ReplaceKnown(v, "")
			}
			hdr.Add(name, v)
		}
	}
	body := rule.Body
	if repl != nil {
		body = repl.ReplaceKnown(body, "")
	}
	if body != "" && hdr.Get("Content-Type") == "" {
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(rule.Status)
	_, err := io.WriteString(w, body)
	if err != nil && h.logger != nil {
		h.logger.Debug("writing open response", zap.Error(err))
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
