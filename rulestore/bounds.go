package rulestore

import "fmt"

// checkSize holds a rule written through Redis to the admin API's limit:
// a huge hash would be copied into every instance's memory, verdicts and
// history.
func checkSize(f Fields) error {
	if n := ruleSize(f); n > MaxRuleBody {
		return fmt.Errorf("rule of %d bytes: over the limit of %d bytes", n, MaxRuleBody)
	}
	return nil
}

// ruleSize is the size of a rule's raw fields: every name and value.
func ruleSize(f Fields) int {
	n := 0
	for name, v := range f {
		n += len(name) + len(v)
	}
	return n
}

// maxFeedback bounds each queue of feedback (verdicts, history entries,
// last-good writes) waiting to be written to Redis, if it stays unwritable.
const maxFeedback = 100_000
