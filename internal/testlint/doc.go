// Package testlint holds a test that checks every *_test.go of the module,
// and every helper file that imports "testing", against two rules of
// docs/reliability.md ("Honest tests"): a skip only under -short, and a
// time.Sleep only with a written reason.
package testlint
