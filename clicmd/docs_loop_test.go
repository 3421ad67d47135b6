package clicmd_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// loopBlocks returns the commands of every sh block marked
// <!-- docs-test: loop --> in file, one block per entry.
func loopBlocks(t *testing.T, file string) [][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	var cur []string
	marked, in := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "<!-- docs-test: loop -->":
			marked = true
		case marked && !in && line == "```sh":
			in, cur = true, nil
		case in && line == "```":
			out = append(out, cur)
			in, marked = false, false
		case in && line != "":
			cmd, _, _ := strings.Cut(line, "#")
			cur = append(cur, strings.TrimSpace(cmd))
		}
	}
	return out
}

// The change loop as docs/rulestore.md, docs/cli.md and the fleet guide print it,
// run as written against two instances that declare product_canary and
// share one Redis: every command exits 0. (Only --wait is lengthened, so
// a busy machine does not fail a check that takes milliseconds.)
func TestDocsChangeLoopRunsAsWritten(t *testing.T) {
	for _, file := range []string{"../docs/rulestore.md", "../docs/cli.md", "../docs/guides/fleet-on-redis.md"} {
		blocks := loopBlocks(t, file)
		if len(blocks) != 1 || len(blocks[0]) < 4 {
			t.Fatalf("%s: want one loop block of at least 4 commands, got %q", file, blocks)
		}
		t.Run(strings.TrimPrefix(file, "../docs/"), func(t *testing.T) {
			r := redistest.Start(t)
			decl := strings.ReplaceAll(grayDecl, "canary_cli", "product_canary")
			a := testcaddy.Start(t, fmt.Sprintf(grayCaddyfile, r.URL(), decl, testcaddy.FreePort(t)))
			b := testcaddy.Start(t, fmt.Sprintf(grayCaddyfile, r.URL(), decl, testcaddy.FreePort(t)))
			for _, p := range []*testcaddy.Process{a, b} {
				testcaddy.Eventually(t, 10*time.Second, "connected to redis", func() bool {
					out, _, ok := sluice(t, p, "store")
					return ok && strings.Contains(out, `"connected": true`)
				})
			}
			for _, line := range blocks[0] {
				args := strings.Fields(line)
				if len(args) < 3 || args[0] != "caddy" || args[1] != "sluice" {
					t.Fatalf("%s: not a caddy sluice command: %q", file, line)
				}
				for i, a := range args {
					if a == "--wait" && i+1 < len(args) {
						args[i+1] = "60s"
					}
				}
				out := mustSluice(t, a, args[2:]...)
				if args[2] == "verdicts" && strings.Count(out, " live ") != 2 {
					t.Fatalf("%s: %s: want two live instances:\n%s", file, line, out)
				}
			}
		})
	}
}
