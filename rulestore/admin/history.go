package admin

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/rulestore"
)

// serveHistory serves GET .../{kind}/{id}/history, GET
// .../{kind}/{id}/verdicts and POST .../{kind}/{id}/rollback?version=<version>.
func serveHistory(w http.ResponseWriter, r *http.Request, a *rulestore.App, k rulestore.Kind, id, what string) error {
	if err := rulestore.ValidID(id); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	switch {
	case what == "history" && r.Method == http.MethodGet:
		h, err := a.History(r.Context(), k, id)
		if err != nil {
			return apiError(http.StatusBadGateway, "reading history from redis: %v", err)
		}
		if len(h) == 0 && a.Lookup(k, id) == nil && a.Rejected(k, id) == nil {
			return notFound("no %s rule %q and no recorded change of it", k, id)
		}
		return writeJSON(w, h)
	case what == "rollback" && r.Method == http.MethodPost:
		return serveRollback(w, r, a, k, id)
	case what == "verdicts" && r.Method == http.MethodGet:
		return serveVerdicts(w, r, a, k, id)
	case what == "verdicts":
		return methodNotAllowed(w, r, http.MethodGet)
	case what == "history":
		return methodNotAllowed(w, r, http.MethodGet)
	case what == "rollback":
		return methodNotAllowed(w, r, http.MethodPost)
	}
	return notFound("not found: %s", r.URL.Path)
}

// serveRollback writes back the raw fields a rule had at a recorded
// version (the new fields of an entry, or the previous fields of one),
// through the same validated, recorded path as a PUT.
func serveRollback(w http.ResponseWriter, r *http.Request, a *rulestore.App, k rulestore.Kind, id string) error {
	version := r.URL.Query().Get("version")
	if version == "" {
		return apiError(http.StatusBadRequest, "rollback needs ?version=<version> (see the rule's history)")
	}
	h, err := a.History(r.Context(), k, id)
	if err != nil {
		return apiError(http.StatusBadGateway, "reading history from redis: %v", err)
	}
	var target rulestore.Fields
	// The declared version is the config's rule with nothing stored: going
	// back to it deletes the overlay, recorded or not (a first overlay
	// that every instance rejected is in no history).
	declared := false
	if st := a.Static(k, id); st != nil && rulestore.Version(st.Fields) == version {
		declared = true
	}
	for _, e := range h {
		if declared {
			break
		}
		if e.Version == version && e.Fields != nil {
			target = e.Fields
			break
		}
		if e.PrevVersion == version && e.Prev != nil {
			target = e.Prev
			break
		}
	}
	if target == nil && !declared {
		return notFound("no version %q in the history of %s rule %q", version, k, id)
	}
	if err := checkIfMatch(r.Header.Get("If-Match")); r.Header.Get("If-Match") != "" && err != nil {
		return err
	}
	q := r.URL.Query()
	req := &rulestore.WriteRequest{Kind: k, ID: id, Op: "upsert", IfMatch: r.Header.Get("If-Match"),
		DryRun: boolParam(q.Get("dry_run")), AllowMissing: boolParam(q.Get("allow_missing")), Via: via(r), HistoryOp: "rollback",
		Next: func(rulestore.Fields) (rulestore.Fields, error) { return target, nil }}
	res, err := a.Write(r.Context(), req)
	if err != nil {
		return err
	}
	res.Op = "rollback" // as the history records it
	if res.Version != "" {
		w.Header().Set("ETag", rulestore.ETag(res.Version))
	}
	return writeJSON(w, res)
}

func serveVerdicts(w http.ResponseWriter, r *http.Request, a *rulestore.App, k rulestore.Kind, id string) error {
	v, err := a.Verdicts(r.Context(), k, id)
	if err != nil {
		return apiError(http.StatusBadGateway, "reading verdicts from redis: %v", err)
	}
	return writeJSON(w, v)
}
