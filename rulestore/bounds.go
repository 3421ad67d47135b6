package rulestore

// ruleSize is the size of a rule's raw fields: every name and value.
func ruleSize(f Fields) int {
	n := 0
	for name, v := range f {
		n += len(name) + len(v)
	}
	return n
}
