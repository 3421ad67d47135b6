package clicmd

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// A gray rule's impact prints each version's share now and proposed.
func TestPrintImpactVersions(t *testing.T) {
	var b strings.Builder
	printImpact(&b, "gray", "checkout", &replay.Impact{Window: "10m0s", Instances: replay.Instances{Asked: 2, Answered: 2},
		Versions: []replay.VersionShare{{Version: "v1", ShareNow: 0.93, ShareProposed: 0.515},
			{Version: "v2", ShareNow: 0.07, ShareProposed: 0.485, RequestsMoved: 664, KeysMoved: 166}}})
	out := b.String()
	for _, want := range []string{"versions          share now", "v1                     93.0%           51.5%", "v2                      7.0%           48.5%                664            166"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
