package grayroute_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// runOnRedis runs Caddy with its rule store on the Redis at redisURL (more
// rulestore lines in store, e.g. rules or `resync 1h`) and one site at
// addr with the given body, waits until the store is connected, and
// returns the admin API's URL.
func runOnRedis(t *testing.T, redisURL, store, addr, body string) string {
	t.Helper()
	admin := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		redis %s
		%s
	}
}
%s {
	%s
}
`, admin, redisURL, store, addr, body))
	adminURL := fmt.Sprintf("http://localhost:%d", admin)
	testcaddy.Eventually(t, 10*time.Second, "redis connected", func() bool {
		_, body := testcaddy.Get(t, adminURL+"/sluice/store")
		return strings.Contains(body, `"connected":true`)
	})
	return adminURL
}
