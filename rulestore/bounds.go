package rulestore

import (
	"fmt"
)

// CheckSize holds a rule written through Redis to the admin API's limit:
// a huge hash would be copied into every instance's memory, verdicts and
// history.
func CheckSize(f Fields) error {
	if n := RuleSize(f); n > MaxRuleBody {
		return fmt.Errorf("rule of %d bytes: over the limit of %d bytes", n, MaxRuleBody)
	}
	return nil
}

// RuleSize is the size of a rule's raw fields: every name and value.
func RuleSize(f Fields) int {
	n := 0
	for name, v := range f {
		n += len(name) + len(v)
	}
	return n
}
