package caddyfile_test

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// Every field of a kind's typed rule is one its parser knows, so the JSON
// form can say nothing the Redis parser would call unknown.
func TestSpecFieldsAreParserFields(t *testing.T) {
	for _, k := range rulestore.Kinds() {
		names := rulestore.SpecFieldNames(k)
		if len(names) == 0 {
			t.Fatalf("%s: no typed fields", k)
		}
		for _, name := range names {
			_, err := rulestore.Parse(k, "probe", rulestore.Fields{name: "\x01"})
			if err != nil && strings.Contains(err.Error(), "field "+name) && strings.Contains(err.Error(), "unknown field") {
				t.Errorf("%s: typed field %s is unknown to the parser: %v", k, name, err)
			}
		}
	}
}
