package handlerkit

import (
	"bytes"
	"encoding/json"

	"github.com/sluicegw/sluice/rulestore"
)

// RuleRef is one entry of a handler's rule list (JSON "rules"): the id of
// a rule of the store, or an inline rule with its id. In JSON an entry is
// the id alone ("per_second") or an object ({"id": "beta", "inline":
// {...}}); both are read in every handler, and an entry is written as it
// was read: the Caddyfile adapter writes grayroute's entries as objects
// and ratelimit's ids alone, as it always has.
type RuleRef[S rulestore.Spec] struct {
	// ID is the rule's id: a rule of the rule store, or the name of the
	// Inline rule.
	ID string `json:"id"`
	// Inline declares the rule here, with the rule store's field names
	// (values typed, or strings in the Redis syntax).
	Inline S `json:"inline,omitempty"`

	object bool // written as an object even without Inline
}

// refObject is RuleRef's object form, without its JSON methods.
type refObject[S rulestore.Spec] struct {
	ID     string `json:"id"`
	Inline S      `json:"inline,omitempty"`
}

// UnmarshalJSON reads an id string or an {"id", "inline"} object.
func (r *RuleRef[S]) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		*r = RuleRef[S]{}
		return json.Unmarshal(b, &r.ID)
	}
	var o refObject[S]
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*r = RuleRef[S]{ID: o.ID, Inline: o.Inline, object: true}
	return nil
}

// MarshalJSON writes the id alone, or the object when it was read as one
// or has an inline rule.
func (r RuleRef[S]) MarshalJSON() ([]byte, error) {
	if !r.object && !r.HasInline() {
		return json.Marshal(r.ID)
	}
	return json.Marshal(refObject[S]{ID: r.ID, Inline: r.Inline})
}

// HasInline reports whether the entry declares its rule inline.
func (r RuleRef[S]) HasInline() bool { return rulestore.SpecFields(r.Inline) != nil }

// Refs makes entries of rule ids.
func Refs[S rulestore.Spec](ids ...string) []RuleRef[S] {
	out := make([]RuleRef[S], len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	return out
}
