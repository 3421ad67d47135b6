package redissource

import (
	"context"
	"github.com/sluicegw/sluice/rulestore"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore/redisconf"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

func TestRefreshQueueCollapsesAndDefersAbsentIDs(t *testing.T) {
	q := newRefreshQueue()
	now := time.Unix(1000, 0)
	a, b := rulestore.RuleRef{Kind: rulestore.RateLimit, ID: "a"}, rulestore.RuleRef{Kind: rulestore.RateLimit, ID: "b"}
	q.add(a, now)
	q.add(a, now)
	q.add(b, now)
	if got := q.take(); len(got) != 2 {
		t.Fatalf("take = %v, want a and b once each", got)
	}
	if got := q.take(); got != nil {
		t.Fatalf("take after take = %v, want nothing", got)
	}

	// a was found absent: named again within absentTTL it waits, and is
	// re-read when the entry expires (a real creation is late, not lost).
	q.found(a, false, now)
	q.add(a, now.Add(absentTTL/2))
	if got := q.take(); got != nil {
		t.Fatalf("an id found absent just now was re-read at once: %v", got)
	}
	q.due(now.Add(absentTTL / 2))
	if got := q.take(); got != nil {
		t.Fatalf("deferred id re-read before its entry expired: %v", got)
	}
	q.due(now.Add(absentTTL))
	if got := q.take(); len(got) != 1 || got[0] != a {
		t.Fatalf("deferred id not re-read when its entry expired: %v", got)
	}
	// Found present again: no longer remembered absent.
	q.found(a, true, now.Add(absentTTL))
	q.add(a, now.Add(absentTTL))
	if got := q.take(); len(got) != 1 {
		t.Fatalf("a present id was deferred: %v", got)
	}
	// After expiry, a named id is re-read at once.
	q.found(b, false, now)
	q.add(b, now.Add(absentTTL))
	if got := q.take(); len(got) != 1 {
		t.Fatalf("an expired absent entry still deferred: %v", got)
	}
}

func TestRefreshQueueBounded(t *testing.T) {
	q := newRefreshQueue()
	now := time.Unix(1000, 0)
	for i := range absentMax + 10 {
		q.found(rulestore.RuleRef{Kind: rulestore.RateLimit, ID: strconv.Itoa(i)}, false, now)
	}
	if len(q.absent) > absentMax {
		t.Fatalf("%d absent ids remembered, bound %d", len(q.absent), absentMax)
	}
	q.due(now.Add(absentTTL))
	if len(q.absent) != 0 {
		t.Fatalf("expired entries kept: %d", len(q.absent))
	}
}

// TestJunkedIDCreatedLaterIsApplied: an id published while absent (junk),
// then really created (HSET + PUBLISH), is applied: the absent-id cache
// delays such a creation until its entry expires, it never hides it. First
// the junk and the creation back to back (they may collapse into one
// read), then three times the path the cache exists for: the junk (200
// messages) read and remembered before the creation arrives. That order is
// made, not slept for: messages are handled in order, so once a marker
// published after the junk is applied, the junk was read. A creation
// applied before its marker2 is deferred unless the entry had already
// expired, which only a box slower than the cache's second can make
// happen: such a round is counted and run again, up to ten rounds.
func TestJunkedIDCreatedLaterIsApplied(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	const ttl = time.Second
	st := startWithAbsentTTL(t, r.URL(), nil, ttl)
	ctx := context.Background()
	junk := func(id string) {
		t.Helper()
		pipe := c.Pipeline()
		for range 200 {
			pipe.Publish(ctx, "gateway:rules:rate_limit", id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	junk("soon")
	push(t, c, "soon", "qps", "9")
	st.waitQPS("soon", "9")

	deferred, expired := 0, 0
	for i := 0; deferred < 3; i++ {
		if i == 10 {
			t.Fatalf("the cache path ran %d times in 10 rounds (%d rounds took longer than its %v)", deferred, expired, ttl)
		}
		id, n := "soon-"+strconv.Itoa(i), strconv.Itoa(i)
		began := time.Now() // the junk's entry expires after began+ttl
		junk(id)
		push(t, c, "marker-"+n, "qps", "1")
		st.waitQPS("marker-"+n, "1")
		push(t, c, id, "qps", "9")
		push(t, c, "marker2-"+n, "qps", "1")
		st.waitQPS("marker2-"+n, "1")
		early, inTime := st.qps(id) == "9", time.Since(began) < ttl
		switch {
		case !early:
			deferred++
		case inTime:
			t.Fatalf("%s created while remembered absent was applied at once: the junk was not remembered", id)
		default:
			expired++
		}
		st.waitQPS(id, "9") // the deferred creation, once its entry expires
	}
	t.Logf("creations deferred by the cache and then applied: %d; rounds slower than the cache's %v: %d", deferred, ttl, expired)
}

// storeUnderTest is an App run in this process, so a test can set what
// only the run goroutine reads once started (the absent-id cache's TTL).
type storeUnderTest struct {
	t   *testing.T
	app *rulestore.App
}

// startWithAbsentTTL provisions and starts an App on Redis at url with the static
// rate-limit rules given and the absent-id cache's TTL, stopped at cleanup;
// it returns once the store is connected and loaded.
func startWithAbsentTTL(t *testing.T, url string, static map[string]rulestore.Fields, ttl time.Duration) *storeUnderTest {
	t.Helper()
	app := &rulestore.App{Redis: &redisconf.Config{URL: url}, Resync: syntax.Duration(time.Hour), RateLimit: static}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := app.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	app.Source().(*redisSource).queue.ttl = ttl // before Start: the run goroutine owns the queue after
	app.Start()
	t.Cleanup(func() { app.Cleanup() })
	ready := func() bool { st := app.Status(); return st.Connected && st.LastResync != nil }
	testcaddy.Eventually(t, 10*time.Second, "store connected and loaded", ready)
	return &storeUnderTest{t: t, app: app}
}

// qps is a rate-limit rule's qps field, "" if there is no such rule.
func (s *storeUnderTest) qps(id string) string {
	if r := s.app.Lookup(rulestore.RateLimit, id); r != nil {
		return r.Fields["qps"]
	}
	return ""
}

func (s *storeUnderTest) waitQPS(id, want string) {
	s.t.Helper()
	testcaddy.Eventually(s.t, 10*time.Second, id+" qps "+want, func() bool { return s.qps(id) == want })
}

// TestDeclaredIDNotRememberedAbsent: a DEL of a declared rule's overlay
// restores the static rule, and a kill switch written right after it is
// applied by its own message, not after the absent-id cache expires. The
// cache is made an hour long here, so on the old code (declared ids
// remembered absent like junk) the second overlay would never arrive
// within the deadline; an undeclared id is still deferred.
func TestDeclaredIDNotRememberedAbsent(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	st := startWithAbsentTTL(t, r.URL(), map[string]rulestore.Fields{"declared": {"limit_type": "token_bucket", "qps": "5"}}, time.Hour)
	qps, waitQPS := st.qps, st.waitQPS

	push(t, c, "declared", "qps", "9")
	waitQPS("declared", "9")
	del(t, c, "declared")
	waitQPS("declared", "5")
	push(t, c, "declared", "qps", "1") // the kill switch, at once
	waitQPS("declared", "1")

	// An undeclared id found absent stays deferred (the junk guard).
	del(t, c, "junk")
	push(t, c, "marker", "qps", "2") // messages are handled in order
	waitQPS("marker", "2")
	push(t, c, "junk", "qps", "3")
	push(t, c, "marker2", "qps", "2")
	waitQPS("marker2", "2")
	if got := qps("junk"); got != "" {
		t.Fatalf("an undeclared id found absent was re-read at once (qps %q): the junk guard is gone", got)
	}
}

// del deletes a rate-limit rule's hash and announces it.
func del(t *testing.T, c redis.Cmdable, id string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Del(ctx, "rate_limit:rule:"+id).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, "gateway:rules:rate_limit", id).Err(); err != nil {
		t.Fatal(err)
	}
}
