package grayroute

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// Manual canary control on the admin API:
//
//	POST /sluice/canary/{rule}/pause     stop analysing and ramping; keep the weight
//	POST /sluice/canary/{rule}/resume    analyse and ramp again
//	POST /sluice/canary/{rule}/rollback  weight 0, state rolled_back
//	POST /sluice/canary/{rule}/promote   weight 100, state promoted
//
// Each writes the rule's state (and weight) through the rule store, exactly
// like an analysis verdict: with Redis it reaches every instance.
func init() { rulestore.RegisterAction("canary", canaryAction) }

// CanaryActionResult is the answer to a canary action.
type CanaryActionResult struct {
	// Rule is the gray rule's id.
	Rule string `json:"rule"`
	// Action is the action run: promote, pause, resume or rollback.
	Action string `json:"action"`
	// Fields are the rule fields the action wrote.
	Fields rulestore.Fields `json:"written"`
}

// canaryPatches are the fields each action writes.
var canaryPatches = map[string]rulestore.Fields{
	"pause":    {"state": StatePaused.String()},
	"resume":   {"state": StateRunning.String()},
	"rollback": {"state": StateRolledBack.String(), "weight": "0"},
	"promote":  {"state": StatePromoted.String(), "weight": "100"},
}

func canaryAction(ctx context.Context, store *rulestore.App, id, action string) (any, error) {
	patch, ok := canaryPatches[action]
	if !ok {
		return nil, &rulestore.ActionError{Status: http.StatusNotFound,
			Err: fmt.Errorf("unknown canary action %q (want pause, resume, rollback or promote)", action)}
	}
	return applyCanaryAction(ctx, store, id, action, patch)
}

// applyCanaryAction writes the action's fields within the admin request's
// context (a client that gives up cancels the write), 5 s at most.
func applyCanaryAction(ctx context.Context, store *rulestore.App, id, action string, patch rulestore.Fields) (any, error) {
	r := store.Lookup(rulestore.Gray, id)
	if r == nil {
		return nil, &rulestore.ActionError{Status: http.StatusNotFound, Err: fmt.Errorf("no gray rule %q", id)}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ok, err := store.Patch(ctx, rulestore.Gray, id, expectFields(r.Fields), patch)
	if err != nil {
		var fe *rulestore.FieldError
		if errors.As(err, &fe) {
			return nil, &rulestore.ActionError{Status: http.StatusBadRequest, Err: fmt.Errorf("gray rule %q: %w", id, err)}
		}
		return nil, &rulestore.ActionError{Status: http.StatusBadGateway, Err: fmt.Errorf("writing gray rule %q: %w", id, err)}
	}
	if !ok {
		return nil, &rulestore.ActionError{Status: http.StatusConflict,
			Err: fmt.Errorf("gray rule %q changed while writing (a verdict or another operator); look at it and try again", id)}
	}
	data := map[string]any{"rule": id, "action": action, "source": "manual"}
	switch action {
	case "rollback":
		rulestore.Emit(EventRolledBack, data)
	case "promote":
		rulestore.Emit(EventPromoted, data)
	}
	return CanaryActionResult{Rule: id, Action: action, Fields: patch}, nil
}
