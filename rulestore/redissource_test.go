package rulestore_test

// The store's Redis source, as package sluice brings it into a build: the
// tests of this package that follow Redis need it registered.
import _ "github.com/sluicegw/sluice/rulestore/redissource"
