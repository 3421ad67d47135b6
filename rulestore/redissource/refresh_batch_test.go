package redissource

import (
	"context"
	"fmt"
	"github.com/sluicegw/sluice/rulestore"
	"slices"
	"testing"
)

// A refresh is one batch, in force at once: a binding updated to name a
// rule created in the same batch never names it before it is in force. The
// binding's slot was updated in place as it was read, while new rules
// waited for the batch's publish: across the round trips of a batch of
// more than refreshBatch ids, a request saw the binding name a rule that
// was not in force yet.
func TestRefreshBatchIsInForceAtOnce(t *testing.T) {
	r, src := resyncedWith(t, map[string][]any{"rate_limit:rule:a": {"qps", "1"}, "gateway:binding:route": {"rate_limit", "a"}})
	c := r.Client()
	ctx := context.Background()
	c.HSet(ctx, "rate_limit:rule:new", "qps", "2")
	c.HSet(ctx, "gateway:binding:route", "rate_limit", "a,new")

	// The binding in the first round trip, the new rule in the second.
	refs := []rulestore.RuleRef{{Kind: rulestore.Binding, ID: "route"}}
	for i := range refreshBatch - 1 {
		refs = append(refs, rulestore.RuleRef{Kind: rulestore.RateLimit, ID: fmt.Sprintf("absent%d", i)})
	}
	refs = append(refs, rulestore.RuleRef{Kind: rulestore.RateLimit, ID: "new"})
	checked := false
	src.client.AddHook(beforeRead{key: "rate_limit:rule:new", do: func() {
		checked = true
		l := src.snapshot()
		if b := l.Get(rulestore.Binding, "route"); b != nil && slices.Contains(b.Value.(*rulestore.RouteBinding).RateLimits, "new") && l.Get(rulestore.RateLimit, "new") == nil {
			t.Errorf("between the batch's round trips, the binding in force names rule new, which is not in force")
		}
	}})
	if err := src.refreshAll(ctx, refs); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the batch's second round trip was never seen")
	}
	l := src.snapshot()
	if b := l.Get(rulestore.Binding, "route"); b == nil || !slices.Equal(b.Value.(*rulestore.RouteBinding).RateLimits, []string{"a", "new"}) {
		t.Fatalf("after the batch: binding %+v, want it naming a and new", b)
	}
	if l.Get(rulestore.RateLimit, "new") == nil {
		t.Fatal("after the batch: rule new is not in force")
	}
}
