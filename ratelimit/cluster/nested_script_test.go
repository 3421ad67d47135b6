package cluster_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/nested"
)

// ptree is a random tree of budgets for the script's property test: every
// node a token bucket or a calendar quota (some in windows unlike their
// parent's), guarantees of one parent's children adding up to at most
// 100 %, leaves at depth 1 to 4.
type ptree struct {
	nodes, leaves []*pnode
}

type pnode struct {
	id     string
	limit  *nested.Limit
	g      float64
	state  nested.State
	parent *pnode
	root   *pnode
}

var periods = []engine.Period{engine.PeriodMinute, engine.PeriodHour, engine.PeriodDay}

func randomLimit(rng *rand.Rand) *nested.Limit {
	if rng.Intn(3) == 0 {
		zone := time.UTC
		if rng.Intn(4) == 0 {
			zone = time.FixedZone("x", 1800)
		}
		cal := &engine.CalendarQuota{Period: periods[rng.Intn(len(periods))], Zone: zone}
		return &nested.Limit{Quota: float64(5 + rng.Intn(60)), Calendar: cal}
	}
	return &nested.Limit{QPS: 0.5 + rng.Float64()*50, Burst: float64(2 + rng.Intn(20))}
}

func randomPTree(rng *rand.Rand) *ptree {
	tr := &ptree{}
	depth := 1 + rng.Intn(4)
	var grow func(parent *pnode, height int)
	grow = func(parent *pnode, height int) {
		k := 1 + rng.Intn(3)
		if parent == nil {
			k = 1
		}
		left := 1.0
		for i := 0; i < k; i++ {
			n := &pnode{id: fmt.Sprintf("n%d", len(tr.nodes)), limit: randomLimit(rng), parent: parent}
			n.root = n
			if parent != nil {
				n.root = parent.root
				if rng.Intn(4) > 0 {
					n.g = left * rng.Float64()
					if i == k-1 && rng.Intn(2) == 0 {
						n.g = left
					}
					left -= n.g
				}
			}
			tr.nodes = append(tr.nodes, n)
			if height == 0 {
				tr.leaves = append(tr.leaves, n)
			} else {
				grow(n, height-1)
			}
		}
	}
	grow(nil, depth-1)
	return tr
}

func (tr *ptree) path(leaf *pnode) ([]nested.Node, []string) {
	var p []nested.Node
	var keys []string
	for n := leaf; n != nil; n = n.parent {
		p = append(p, nested.Node{Limit: n.limit, Guarantee: n.g, State: &n.state})
		keys = append(keys, cluster.NestedRedisKey("p:", n.root.id, []byte("k"), n.id, []byte("k")))
	}
	return p, keys
}

// redisState reads a node's hash as a nested.State (a missing hash is the
// zero State, a new node).
func redisState(t *testing.T, c *redis.Client, key string) nested.State {
	t.Helper()
	h, err := c.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	num := func(f string) float64 {
		v, _ := strconv.ParseFloat(h[f], 64)
		return v
	}
	at, _ := strconv.ParseInt(h["at"], 10, 64)
	gat, _ := strconv.ParseInt(h["gat"], 10, 64)
	return nested.State{At: at, Level: num("lv"), Reserved: num("rs"), GAt: gat, GLeft: num("gl"), GUsed: num("gu")}
}

// The script is nested.Spend: on random trees of mixed kinds and random
// spend sequences (spends of 0 to 4, fractions among them; instants
// close together, the same instant, and jumps past windows), each spend
// runs both in Go and in Redis on the same inputs, and the two agree on
// the decision, the refusing level and its wait, every level's outcome,
// and every node's state afterwards, bit for bit.
func TestNestedScriptAgreesWithSpend(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	ctx := context.Background()
	seeds, steps := 60, 400
	if testing.Short() {
		seeds = 10
	}
	base := time.Date(2026, 12, 7, 23, 58, 0, 0, time.UTC).UnixNano()
	var allowed, refused, usage, above, borrowed, chained int
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rd.Flush() // each seed's tree names its nodes afresh
		rng := rand.New(rand.NewSource(seed))
		tr := randomPTree(rng)
		now := base + rng.Int63n(int64(time.Hour))
		for step := 0; step < steps; step++ {
			switch r := rng.Intn(100); {
			case r < 2:
				now += int64(time.Duration(rng.Intn(48)) * time.Hour)
			case r < 10:
			default:
				now += int64(rng.ExpFloat64() * float64(20*time.Millisecond))
			}
			n := float64(rng.Intn(5))
			if rng.Intn(5) == 0 {
				n = math.Round(rng.Float64()*300) / 100
			}
			leaf := tr.leaves[rng.Intn(len(tr.leaves))]
			path, keys := tr.path(leaf)
			var want, got nested.Outcome
			wok := nested.Spend(path, n, now, &want)
			gok, err := cluster.NestedSpend(ctx, c, keys, path, n, now, &got)
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if gok != wok || got != want {
				t.Fatalf("seed %d step %d: spend %v on depth %d:\n Go  %v %+v\n Lua %v %+v", seed, step, n, len(path), wok, want, gok, got)
			}
			for i, k := range keys {
				if s := redisState(t, c, k); s != *path[i].State {
					t.Fatalf("seed %d step %d level %d: state\n Go  %+v\n Lua %+v", seed, step, i, *path[i].State, s)
				}
			}
			switch {
			case n <= 0:
				usage++
			case wok:
				allowed++
			default:
				refused++
			}
			if want.Refused > 0 {
				above++
			}
			if wok && n > 0 && want.Levels[0].Borrowed > 0 {
				borrowed++
			}
			if wok && want.Depth > 2 && want.Levels[0].Borrowed <= 0 && want.Levels[1].Guaranteed > 0 {
				chained++
			}
		}
	}
	t.Logf("%d spends allowed (%d borrowing at the leaf's parent, %d chained within guarantees), %d refused (%d above the leaf), %d reads, all alike",
		allowed, borrowed, chained, refused, above, usage)
	for _, c := range []int{allowed, borrowed, chained, refused, above, usage} {
		if c == 0 {
			t.Fatal("the sequences did not exercise every outcome")
		}
	}
}

// A spend along a three-level path is one command to Redis: after the
// script is loaded, a hundred spends are a hundred EVALSHA calls, and
// every other command Redis counted ran inside them (INFO commandstats).
// The path's keys share a hash slot.
func TestNestedSpendIsOneRoundTrip(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	ctx := context.Background()
	key := &nested.Limit{QPS: 1000, Burst: 1000}
	team := &nested.Limit{QPS: 1000, Burst: 1000}
	org := &nested.Limit{QPS: 1000, Burst: 1000}
	path := []nested.Node{{Limit: key, Guarantee: 0.5}, {Limit: team, Guarantee: 0.5}, {Limit: org}}
	keys := []string{
		cluster.NestedRedisKey("", "org", []byte("acme"), "key", []byte("k1")),
		cluster.NestedRedisKey("", "org", []byte("acme"), "team", []byte("a")),
		cluster.NestedRedisKey("", "org", []byte("acme"), "org", []byte("acme")),
	}
	var out nested.Outcome
	if _, err := cluster.NestedSpend(ctx, c, keys, path, 1, 0, &out); err != nil {
		t.Fatal(err) // loads the script
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const spends = 100
	for i := 0; i < spends; i++ {
		if ok, err := cluster.NestedSpend(ctx, c, keys, path, 1, 0, &out); err != nil || !ok {
			t.Fatalf("spend %d: %v %+v", i, err, out)
		}
	}
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		calls[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.Atoi(n)
	}
	// Redis counts the commands a script calls too: per spend, Redis's
	// clock and a read, a write and an expiry per level, all inside the
	// one EVALSHA.
	want := map[string]int{"config|resetstat": 1, "evalsha": spends, "time": spends,
		"hmget": 3 * spends, "hset": 3 * spends, "pexpire": 3 * spends}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("commands for %d spends: %v, want %v", spends, calls, want)
	}
	if slot := cluster.KeySlot(keys[0]); cluster.KeySlot(keys[1]) != slot || cluster.KeySlot(keys[2]) != slot {
		t.Fatalf("a tree's keys in slots %d, %d, %d", slot, cluster.KeySlot(keys[1]), cluster.KeySlot(keys[2]))
	}
}

// On a Redis Cluster, trees under different root keys land on different
// nodes, and each tree's path is still one script (its keys share the
// root's slot; a path across slots would fail with CROSSSLOT): an org of
// burst 4 with two teams guaranteed half each, one team spends 4 (2
// borrowed), the other still gets its 2 and no more.
func TestNestedSpendOnRedisCluster(t *testing.T) {
	rc := redistest.StartCluster(t, 3)
	c := rc.Client(t)
	ctx := context.Background()
	org := &nested.Limit{QPS: 1e-4, Burst: 4}
	team := &nested.Limit{QPS: 1e-4, Burst: 4}
	for o := 0; o < 12; o++ {
		root := []byte(fmt.Sprintf("org%d", o))
		spend := func(teamKey string) (allowed int) {
			keys := []string{cluster.NestedRedisKey("", "org", root, "team", []byte(teamKey)),
				cluster.NestedRedisKey("", "org", root, "org", root)}
			path := []nested.Node{{Limit: team, Guarantee: 0.5}, {Limit: org}}
			for i := 0; i < 6; i++ {
				var out nested.Outcome
				ok, err := cluster.NestedSpend(ctx, c, keys, path, 1, 0, &out)
				if err != nil {
					t.Fatalf("org %d team %s: %v", o, teamKey, err)
				}
				if ok {
					allowed++
				}
			}
			return allowed
		}
		if a, b := spend("a"), spend("b"); a != 4 || b != 2 {
			t.Fatalf("org %d: team a got %d, b %d; want 4 (2 borrowed) and its guarantee of 2", o, a, b)
		}
	}
	if n := rc.NodesHolding("ratelimit:nq:*"); n < 2 {
		t.Fatalf("12 trees on %d of 3 nodes; want them spread", n)
	}
}

// A bucket so slow that its refill from the deepest debt takes longer
// than int64 ms still gets an expiry Redis keeps (a negative one would
// delete the node at once): the spend stays counted.
func TestNestedSlowBucketKeepsItsNode(t *testing.T) {
	rd := redistest.Start(t)
	c := rd.Client()
	ctx := context.Background()
	path := []nested.Node{{Limit: &nested.Limit{QPS: 1e-12, Burst: 1e9}}}
	keys := []string{cluster.NestedRedisKey("", "r", []byte("k"), "r", []byte("k"))}
	var out nested.Outcome
	if ok, err := cluster.NestedSpend(ctx, c, keys, path, 5, 0, &out); err != nil || !ok {
		t.Fatalf("spend: %v %+v", err, out)
	}
	ttl, err := c.PTTL(ctx, keys[0]).Result()
	if err != nil || ttl < 365*24*time.Hour {
		t.Fatalf("node's TTL %v (%v), want years", ttl, err)
	}
	if used := redisState(t, c, keys[0]).Level; used != 1e9-5 {
		t.Fatalf("node holds %v tokens, want %v", used, 1e9-5)
	}
}
