package handlerkit

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/rulestore"
)

// OnMissing says what a handler does with a request while a rule (or route
// binding) it names does not exist: a rule that has not arrived in Redis
// yet, or a typo.
type OnMissing struct {
	// OnMissingRule is pass (the default: the request goes on unchecked,
	// and the missing rule is warned about and listed in /sluice/state) or
	// refuse (503 Service Unavailable until the rule exists), for
	// operators who prefer a route closed to one unprotected.
	OnMissingRule string `json:"on_missing_rule,omitempty"`
}

// The values of on_missing_rule.
const (
	MissingPass   = "pass"
	MissingRefuse = "refuse"
)

// Validate checks the value; directive names the handler in the error.
func (o OnMissing) Validate(directive string) error {
	switch o.OnMissingRule {
	case "", MissingPass, MissingRefuse:
		return nil
	}
	return fmt.Errorf("%s: on_missing_rule %q: want pass or refuse", directive, o.OnMissingRule)
}

// Refuse reports whether a request whose rule is missing is refused.
func (o OnMissing) Refuse() bool { return o.OnMissingRule == MissingRefuse }

// RefuseMissing is the handler error for a request refused because the
// rule (or route binding) k/id it names does not exist.
func RefuseMissing(directive string, k rulestore.Kind, id string) error {
	return caddyhttp.Error(http.StatusServiceUnavailable,
		fmt.Errorf("%s: no %s %q (on_missing_rule refuse)", directive, k, id))
}

// ParseOnMissing reads `on_missing_rule pass|refuse`, d at the line's name.
func ParseOnMissing(d *caddyfile.Dispenser, directive string, o *OnMissing) error {
	if !d.NextArg() {
		return d.Errf("%s: on_missing_rule needs pass or refuse", directive)
	}
	o.OnMissingRule = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	if err := o.Validate(directive); err != nil {
		return d.Err(err.Error())
	}
	return nil
}
