package admin

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/rulestore"
)

// checkIfMatch parses an If-Match header (a list of quoted entity tags, or
// *): a malformed one is a 400, as Caddy's /config answers.
func checkIfMatch(header string) error {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag != "*" && (len(tag) < 2 || tag[0] != '"' || tag[len(tag)-1] != '"') {
			return apiError(http.StatusBadRequest, "malformed If-Match %s: want a quoted entity tag, e.g. If-Match: \"%s\" (the ETag of a GET)",
				rulestore.Clip(strconv.Quote(header), 64), "9f2c51d0e4a7")
		}
	}
	return nil
}

// readBody reads a JSON object of fields. With patch, a null value unsets
// the field; unset lists them.
func readBody(r *http.Request, patch bool) (f rulestore.Fields, unset []string, err error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, rulestore.MaxRuleBody+1))
	if err != nil || len(body) > rulestore.MaxRuleBody {
		return nil, nil, apiError(http.StatusBadRequest, "rule body unreadable or over %d bytes", rulestore.MaxRuleBody)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, nil, apiError(http.StatusBadRequest, "rule body: want a JSON object of fields: %v", err)
	}
	if raw == nil { // null: an empty rule, rejected below with the field it lacks
		raw = map[string]json.RawMessage{}
	}
	if patch {
		for name, v := range raw {
			if string(v) == "null" {
				unset = append(unset, name)
				delete(raw, name)
			}
		}
	}
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, apiError(http.StatusBadRequest, "rule body: %v", err)
	}
	return f, unset, nil
}

// serveWrite handles PUT, PATCH and DELETE of one rule through the admin
// API. PUT replaces the raw fields held for the id (the overlay of a static
// rule, or a whole rule); PATCH changes single fields of it (null unsets
// one); DELETE removes it (a static rule comes back as declared).
// If-Match makes the write conditional on the current ETag (412 else);
// ?dry_run=true validates and answers the diff without writing (with
// &impact=10m, and what the rule would have done to that much recent
// traffic: rulestore.App.Impact);
// ?allow_missing=true accepts a binding to rules that do not exist yet.
func serveWrite(w http.ResponseWriter, r *http.Request, a *rulestore.App, k rulestore.Kind, id string) error {
	if err := rulestore.ValidID(id); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	if err := checkIfMatch(r.Header.Get("If-Match")); r.Header.Get("If-Match") != "" && err != nil {
		return err
	}
	q := r.URL.Query()
	req := &rulestore.WriteRequest{Kind: k, ID: id, Op: "upsert", IfMatch: r.Header.Get("If-Match"),
		DryRun: boolParam(q.Get("dry_run")), AllowMissing: boolParam(q.Get("allow_missing")), Via: via(r)}
	var err error
	if req.Impact, err = impactParam(r); err != nil {
		return err
	}
	switch r.Method {
	case http.MethodPut:
		f, _, err := readBody(r, false)
		if err != nil {
			return err
		}
		req.Next = func(rulestore.Fields) (rulestore.Fields, error) { return f, nil }
	case http.MethodPatch:
		f, unset, err := readBody(r, true)
		if err != nil {
			return err
		}
		req.Patched = map[string]bool{}
		for name := range f {
			req.Patched[name] = true
		}
		for _, name := range unset {
			req.Patched[name] = true
		}
		req.Next = func(cur rulestore.Fields) (rulestore.Fields, error) {
			if cur == nil && a.Static(k, id) == nil {
				return nil, rulestore.Errorf(rulestore.ErrNotFound, "no %s rule %q to patch (create it with PUT)", k, id)
			}
			out := rulestore.Fields{}
			maps.Copy(out, cur)
			maps.Copy(out, f)
			for _, name := range unset {
				delete(out, name)
			}
			if len(out) == 0 {
				return nil, nil // every overlay field unset: back to the static rule
			}
			return out, nil
		}
	case http.MethodDelete:
		req.Op = "delete"
		req.Next = func(cur rulestore.Fields) (rulestore.Fields, error) {
			if cur != nil {
				return nil, nil
			}
			if a.Static(k, id) != nil {
				return nil, rulestore.Errorf(rulestore.ErrNotFound, "%s rule %q is declared in the config and has no overlay "+
					"in %s to delete (it changes with the config)", k, id, a.WritesTo())
			}
			return nil, rulestore.Errorf(rulestore.ErrNotFound, "no %s rule %q", k, id)
		}
	}
	res, err := a.Write(r.Context(), req)
	if err != nil {
		return err
	}
	if res.Version != "" {
		w.Header().Set("ETag", rulestore.ETag(res.Version))
	}
	return writeJSON(w, res)
}

func boolParam(v string) bool { b, _ := strconv.ParseBool(v); return b }

// impactParam reads ?impact=<duration>, the window a dry run's preview
// replays (0 without one).
func impactParam(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("impact")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, apiError(http.StatusBadRequest, "impact=%s: want a duration, e.g. impact=10m", rulestore.Clip(v, 32))
	}
	return d, nil
}

// via names who made a change for the history: the CLI says so in a
// header, anything else is the admin API.
func via(r *http.Request) string {
	switch v := r.Header.Get("X-Sluice-Via"); v {
	case "cli", "apply", "rollback":
		return v
	}
	return "admin_api"
}
