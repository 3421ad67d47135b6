package monitoring_test

import (
	"os"
	"regexp"
	"testing"

	_ "github.com/sluicegw/sluice" // every Sluice module, as in the built binary
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var alertLine = regexp.MustCompile(`(?m)^\s+- alert: (\w+)$`)

// alertNames are the alerts rules.yml defines.
func alertNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, m := range alertLine.FindAllStringSubmatch(readFile(t, "rules.yml"), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatal("rules.yml defines no alert")
	}
	return names
}
