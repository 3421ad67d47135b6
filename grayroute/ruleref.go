package grayroute

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/sluicegw/sluice/rulestore"
)

// ruleRefJSON is RuleRef as JSON: the inline rule typed.
type ruleRefJSON struct {
	ID     string              `json:"id"`
	Inline *rulestore.GraySpec `json:"inline,omitempty"`
}

// MarshalJSON writes the inline rule typed (what `caddy adapt` shows).
func (r RuleRef) MarshalJSON() ([]byte, error) {
	out := ruleRefJSON{ID: r.ID}
	if r.Inline != nil {
		s, err := rulestore.SpecFromFields(rulestore.Gray, r.Inline)
		if err != nil {
			return nil, fmt.Errorf("inline gray rule %q: %w", r.ID, err)
		}
		out.Inline = s.(*rulestore.GraySpec)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the inline rule typed (or with Redis-syntax
// strings), naming the rule in an error.
func (r *RuleRef) UnmarshalJSON(b []byte) error {
	var in ruleRefJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // as Caddy reads a module's config
	if err := dec.Decode(&in); err != nil {
		if in.ID != "" {
			return fmt.Errorf("inline gray rule %q: %w", in.ID, err)
		}
		return err
	}
	*r = RuleRef{ID: in.ID}
	if in.Inline != nil {
		r.Inline = rulestore.SpecFields(in.Inline)
	}
	return nil
}
