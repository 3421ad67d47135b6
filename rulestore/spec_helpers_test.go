package rulestore

// rateLimitSpecs are static rate_limit rules given by their Redis fields.
func rateLimitSpecs(m map[string]Fields) RuleSet[*RateLimitSpec] {
	out := RuleSet[*RateLimitSpec]{}
	for id, f := range m {
		s, err := SpecFromFields(RateLimit, f)
		if err != nil {
			panic(err)
		}
		out[id] = s.(*RateLimitSpec)
	}
	return out
}
