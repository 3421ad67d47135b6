package rulestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// MaxRuleBody bounds a rule written through the admin API, in bytes.
const MaxRuleBody = 64 << 10

// WriteResult is the answer to a PUT, PATCH, DELETE or rollback.
type WriteResult struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Op   string `json:"op"` // upsert, delete, or rollback
	// Version is the version of the stored state after the change (see
	// storedVersion); Fields the effective rule (the static rule overlaid
	// by Overlay). Both empty if no rule remains.
	Version string `json:"version,omitempty"`
	Fields  Fields `json:"fields,omitempty"`
	// Overlay is the raw field set now held in Redis (or memory).
	Overlay     Fields `json:"overlay,omitempty"`
	PrevVersion string `json:"prev_version,omitempty"`
	// Diff lists the effective fields that change.
	Diff []FieldChange `json:"diff"`
	// Value is the rule typed as in a JSON config (dry runs).
	Value  Spec `json:"value,omitempty"`
	DryRun bool `json:"dry_run,omitempty"`
	// Impact is what the written rule would have done to the recent
	// traffic (a dry run with an impact window).
	Impact *replay.Impact `json:"impact,omitempty"`
	// Stored is where the change went: redis, or memory without Redis.
	Stored string `json:"stored"`
	Note   string `json:"note,omitempty"`
	// NotDeclaredOn names the live instances whose config does not
	// declare the rule while others' does: an overlay is not used there
	// (rulestore/redissource, declares.go).
	NotDeclaredOn []string `json:"not_declared_on,omitempty"`
}

// FieldChange is one field's change: added, removed or changed.
type FieldChange struct {
	// Field is the field's name.
	Field string `json:"field"`
	// Change is added, removed or changed.
	Change string `json:"change"`
	// Old is the value before (removed, changed).
	Old string `json:"old,omitempty"`
	// New is the value after (added, changed).
	New string `json:"new,omitempty"`
}

// DiffFields lists the changes from a to b, by field name.
func DiffFields(a, b Fields) []FieldChange {
	out := []FieldChange{}
	for _, name := range MergeFields(a, b).Names() {
		av, inA := a[name]
		bv, inB := b[name]
		switch {
		case inA && !inB:
			out = append(out, FieldChange{Field: name, Change: "removed", Old: av})
		case !inA && inB:
			out = append(out, FieldChange{Field: name, Change: "added", New: bv})
		case av != bv:
			out = append(out, FieldChange{Field: name, Change: "changed", Old: av, New: bv})
		}
	}
	return out
}

const memoryNote = "no redis configured: the change is held in this process's memory only " +
	"(kept across caddy reload, lost on restart, not shared with other instances)"

// WriteRequest is one write of one rule through the admin API.
type WriteRequest struct {
	// Kind and ID name the rule.
	Kind Kind
	ID   string
	// Op is upsert or delete.
	Op string
	// IfMatch is the request's If-Match header ("": unconditional).
	IfMatch string
	// DryRun validates and fills the result without writing.
	DryRun bool
	// Impact, with DryRun: replay this much of the rule's recent traffic
	// against the written rule (WriteResult.Impact); 0: none.
	Impact time.Duration
	// AllowMissing accepts a binding to rules that do not exist yet.
	AllowMissing bool
	// Via names who made the change, for the history (see history.Entry).
	Via string
	// HistoryOp is "rollback" for a rollback, else "".
	HistoryOp string
	// Patched names the fields a PATCH sets or unsets, to tell them from
	// the stored ones in an error.
	Patched map[string]bool
	// Next returns the new raw fields from the ones held now (cur nil:
	// none); nil fields mean delete. An error writes nothing; give it its
	// class with Errorf (one without a class counts as a backend failure).
	Next func(cur Fields) (Fields, error)
}

// errDryRun stops a write after validation.
var errDryRun = errors.New("dry run")

// ETag is the entity tag of a rule version.
func ETag(version string) string { return `"` + version + `"` }

// StoredVersion is the one version id of a rule's state: the version of
// the raw fields stored for it in Redis (or memory), or, with none stored,
// of the rule as declared in the config (st); "" for no rule. ETags,
// If-Match, history, verdicts, rollback and the change log all use it, so
// a version read anywhere is accepted everywhere.
func StoredVersion(st *Rule, raw Fields) string {
	switch {
	case raw != nil:
		return Version(raw)
	case st != nil:
		return Version(st.Fields)
	}
	return ""
}

// Version is the version of the rule's stored state (see storedVersion).
func (r *Rule) Version() string {
	if r.Overlay != nil {
		return Version(r.Overlay)
	}
	return Version(r.Fields)
}

// storedFieldError says so when a PATCH fails on a field it does not
// change: the value stored in Redis (or memory) is at fault, not the
// request.
func storedFieldError(req *WriteRequest, cur Fields, err error) error {
	var fe *FieldError
	if req.Patched == nil || !errors.As(err, &fe) || req.Patched[fe.Field] {
		return err
	}
	if _, stored := cur[fe.Field]; !stored {
		return err
	}
	name := clip(fe.Field)
	return fmt.Errorf("the stored value of field %s (version %s, not changed by this PATCH) is invalid: %w; "+
		"set %s in this PATCH (or unset it with null), or replace the rule with PUT", name, Version(cur), err, name)
}

// matchETag reports whether an If-Match header accepts the current version
// ("" when no rule exists).
func matchETag(header, version string) bool {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if (tag == "*" && version != "") || (version != "" && tag == ETag(version)) {
			return true
		}
	}
	return false
}

// plan validates one write against the raw fields held now and fills the
// result. It returns the new raw fields and their parsed value.
func (a *App) plan(ctx context.Context, req *WriteRequest, cur Fields, res *WriteResult) (Fields, any, error) {
	k, id := req.Kind, req.ID
	st := a.Static(k, id)
	var before Fields
	switch {
	case cur != nil:
		before = cur
		if st != nil {
			before = MergeFields(st.Fields, cur)
		}
	case st != nil:
		before = st.Fields
	}
	res.PrevVersion = StoredVersion(st, cur)
	if req.IfMatch != "" && !matchETag(req.IfMatch, res.PrevVersion) {
		return nil, nil, Errorf(ErrPreconditionFailed,
			"If-Match %s does not match the current version %s of %s rule %q", clip(req.IfMatch), ETag(res.PrevVersion), k, id)
	}
	raw, err := req.Next(cur)
	if err != nil {
		return nil, nil, err
	}
	var value any
	var after Fields
	if raw != nil {
		var perr error
		if perr = CheckSize(raw); perr == nil {
			value, after, perr = ParseOver(k, id, st, raw)
		}
		if perr == nil {
			perr = a.checkAmong(k, id, value)
		}
		if perr != nil {
			perr = storedFieldError(req, cur, perr)
			adminWrites.WithLabelValues(k.String(), req.Op, "invalid").Inc()
			EmitRejected(k, id, "admin_api", perr)
			if st == nil && cur == nil && IncompleteHere(raw, perr) {
				perr = fmt.Errorf("%w (a rule that is not declared in the config must be complete)", perr)
			}
			return nil, nil, &Error{Class: ErrInvalid, Err: perr}
		}
		if b, ok := value.(*RouteBinding); ok && !req.AllowMissing {
			if missing := a.missingRefs(ctx, b); len(missing) > 0 {
				return nil, nil, Errorf(ErrConflict, "binding %q refers to rules that do not exist: %s "+
					"(write them first, or add ?allow_missing=true)", id, strings.Join(missing, ", "))
			}
		}
	} else {
		res.Op = "delete" // also a PATCH that unset every field
		if st != nil {
			after = st.Fields // deleting an overlay brings the static rule back
		}
	}
	res.Overlay, res.Fields, res.Diff = raw, after, DiffFields(before, after)
	if after != nil {
		res.Version = StoredVersion(st, raw)
	}
	if req.DryRun && after != nil {
		res.Value, _ = SpecFromFields(k, after)
	}
	return raw, value, nil
}

// missingRefs lists the rules a binding names that exist nowhere: not in
// the config, not in Redis (read there, not from this instance's copy, so
// a rule written a moment ago counts), not in memory.
func (a *App) missingRefs(ctx context.Context, b *RouteBinding) []string {
	var missing []string
	check := func(k Kind, id string) {
		if id == "" || a.Static(k, id) != nil {
			return
		}
		if held, err := a.source.Exists(ctx, k, id); err == nil && !held {
			missing = append(missing, k.String()+" "+id)
		}
	}
	for _, id := range b.RateLimits {
		check(RateLimit, id)
	}
	check(CircuitBreaker, b.CircuitBreaker)
	for _, g := range b.Gray {
		check(Gray, g)
	}
	return missing
}

// Write validates one write and runs it: in memory, or in Redis where the
// current fields are read and the new ones written in one
// WATCH/MULTI/EXEC, so an If-Match holds against concurrent writers. A
// failed write is an *Error: its class says why (ErrBackend for Redis).
func (a *App) Write(ctx context.Context, req *WriteRequest) (WriteResult, error) {
	res := WriteResult{Kind: req.Kind.String(), ID: req.ID, Op: req.Op, DryRun: req.DryRun, Stored: "redis"}
	if err := checkImpactRequest(req.Kind, req.DryRun, req.Impact); err != nil {
		return res, err
	}
	var err error
	if a.redis == nil {
		res.Stored, res.Note = "memory", memoryNote
	}
	err = a.source.Write(ctx, req.Kind, req.ID, req.Via, req.HistoryOp, a.Static(req.Kind, req.ID), func(cur Fields) (Fields, error) {
		raw, _, err := a.plan(ctx, req, cur, &res)
		if err == nil && req.DryRun {
			err = errDryRun
		}
		return raw, err
	})
	if err == nil || errors.Is(err, errDryRun) {
		if res.Op != "delete" {
			res.NotDeclaredOn = a.lacking(ctx, req.Kind, req.ID)
		}
	}
	if errors.Is(err, errDryRun) {
		if req.Impact > 0 && res.Fields != nil {
			imp, err := a.Impact(ctx, ImpactQuery{Kind: req.Kind, ID: req.ID, Fields: res.Fields, Window: req.Impact})
			if err != nil {
				return res, err
			}
			res.Impact = &imp
		}
		return res, nil
	}
	if err != nil {
		switch ClassOf(err) {
		case "":
			adminWrites.WithLabelValues(req.Kind.String(), req.Op, "redis_error").Inc()
			err = Errorf(ErrBackend, "writing to redis: %w", err)
		case ErrNotFound:
			adminWrites.WithLabelValues(req.Kind.String(), req.Op, "not_found").Inc()
		}
		return res, err
	}
	adminWrites.WithLabelValues(req.Kind.String(), req.Op, "ok").Inc()
	a.logger.Info("rule written through the admin API", zap.String("kind", res.Kind), zap.String("id", res.ID),
		zap.String("op", res.Op), zap.String("stored", res.Stored), zap.String("via", req.Via))
	if a.redis == nil {
		EmitUpdated(req.Kind, req.ID, res.Op, "memory", res.Overlay)
	}
	return res, nil
}

// WritesTo names where writes go: redis, or memory without Redis.
func (a *App) WritesTo() string {
	if a.source == nil {
		return "memory"
	}
	return a.source.Name()
}

// EmitUpdated sends rule_updated for an applied change (f nil: a delete).
func EmitUpdated(k Kind, id, op, source string, f Fields) {
	data := map[string]any{"kind": k.String(), "id": id, "op": op, "source": source}
	if f != nil {
		data["version"] = Version(f)
	}
	Emit(EventRuleUpdated, data)
}

// EmitRejected sends rule_rejected for a rule that failed validation.
func EmitRejected(k Kind, id, source string, err error) {
	field := ""
	var fe *FieldError
	if errors.As(err, &fe) {
		field = fe.Field
	}
	Emit(EventRuleRejected, map[string]any{"kind": k.String(), "id": id, "source": source, "field": field, "error": err.Error()})
}
