package admin

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/sluicegw/sluice/rulestore"
)

// maxApplyBody bounds the body of POST /sluice/apply.
const maxApplyBody = 16 << 20

// serveApply handles POST /sluice/apply[?dry_run=true[&impact=10m]]: 200
// with every object's verdict (and a changed rate_limit rule's impact) when the set is (or would be) written; 400, or 412 when
// a rule changed from its expected version, with the verdicts when nothing
// is written.
func serveApply(w http.ResponseWriter, r *http.Request, a *rulestore.App) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return notAllowed(r)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxApplyBody+1))
	if err != nil || len(body) > maxApplyBody {
		return apiError(http.StatusRequestEntityTooLarge, "rule set unreadable or over %d bytes", maxApplyBody)
	}
	var req rulestore.ApplyRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return apiError(http.StatusBadRequest, `rule set: want {"rules": {"<kind>": {"<id>": {"<field>": value}}}}: %v`, err)
	}
	if req.Impact, err = impactParam(r); err != nil {
		return err
	}
	res, err := a.Apply(r.Context(), req, boolParam(r.URL.Query().Get("dry_run")))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(applyStatus(res))
	return json.NewEncoder(w).Encode(res)
}
