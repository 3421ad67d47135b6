package grayroute

import "github.com/sluicegw/sluice/rulestore"

// graySpec is an inline rule given by its Redis fields.
func graySpec(f rulestore.Fields) *rulestore.GraySpec {
	s, err := rulestore.SpecFromFields(rulestore.Gray, f)
	if err != nil {
		panic(err)
	}
	return s.(*rulestore.GraySpec)
}
