package redissource

import (
	"context"
	"github.com/sluicegw/sluice/rulestore"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SCAN only promises the keys that exist for the whole scan. A writer that
// creates rules, then a binding naming them, while a resync scans can have
// the binding seen and a rule missed (grayroute's
// TestGrayRuleChurnLeavesNoSeries saw it under load): the binding was in
// force without its rule until the rule's message was taken. Here a hook on
// the source's client runs that writer at the worst moment, once the scan
// of rate_limit keys has ended and before bindings are scanned; the test
// runs the resync itself, so no message is taken after it. Right after the
// resync, every rule the binding names that exists in Redis must be in
// force; an id that exists nowhere stays missing.
func TestResyncTakesBoundRulesTheScanMissed(t *testing.T) {
	r, src := resyncedWith(t, map[string][]any{"rate_limit:rule:early": {"qps", "1"}})
	c := r.Client()
	ctx := context.Background()

	wrote := false
	src.client.AddHook(afterScan{pattern: "rate_limit:rule:*", do: func() {
		if wrote {
			return
		}
		wrote = true
		for _, id := range []string{"late1", "late2"} {
			c.HSet(ctx, "rate_limit:rule:"+id, "qps", "2")
			c.Publish(ctx, "gateway:rules:rate_limit", id)
		}
		c.HSet(ctx, "gateway:binding:route", "rate_limit", "early,late1,late2,ghost")
		c.Publish(ctx, "gateway:rules:binding", "route")
	}})
	if err := src.fullResync(ctx, "periodic"); err != nil {
		t.Fatal(err)
	}
	if !wrote {
		t.Fatal("the hook never saw the scan of rate_limit keys end")
	}

	l := src.snapshot()
	b := l.Get(rulestore.Binding, "route")
	if b == nil {
		t.Fatal("the binding written during the scan was not seen: the race was not produced")
	}
	for _, id := range b.Value.(*rulestore.RouteBinding).RateLimits {
		switch r := l.Get(rulestore.RateLimit, id); {
		case id == "ghost" && r != nil:
			t.Errorf("rule %s, in no Redis key, is in force", id)
		case id != "ghost" && r == nil:
			t.Errorf("rule %s, in Redis and named by the binding in force, is not in force after the resync", id)
		}
	}
}

// A Redis that restarts empty while the resync re-reads the rules its scan
// missed must be handled as before that re-read existed: the layer is the
// scan's (the re-read only adds rules it finds, so it finds none), and the
// next resync sees the epoch changed and keeps every rule held.
func TestResyncRereadOfEmptiedRedisDeletesNothing(t *testing.T) {
	r, src := resyncedWith(t, map[string][]any{"rate_limit:rule:early": {"qps", "1"}, "gateway:binding:route": {"rate_limit", "early,late"}})
	c := r.Client()
	ctx := context.Background()
	wrote, flushed := false, false
	src.client.AddHook(afterScan{pattern: "rate_limit:rule:*", do: func() {
		if !wrote {
			wrote = true
			c.HSet(ctx, "rate_limit:rule:late", "qps", "2")
		}
	}})
	src.client.AddHook(beforeRead{key: "rate_limit:rule:late", do: func() {
		if wrote && !flushed {
			flushed = true
			c.FlushAll(ctx)
		}
	}})
	if err := src.fullResync(ctx, "periodic"); err != nil {
		t.Fatal(err)
	}
	if !flushed {
		t.Fatal("the resync never re-read the rule its scan missed")
	}
	// Redis restarted empty after the scan: the layer is the scan's.
	held := func(when string) {
		t.Helper()
		if src.snapshot().Get(rulestore.RateLimit, "early") == nil || src.snapshot().Get(rulestore.Binding, "route") == nil {
			t.Errorf("%s: a rule held was dropped after Redis lost its data", when)
		}
	}
	held("right after the re-read")
	if src.snapshot().Get(rulestore.RateLimit, "late") != nil {
		t.Error("rule late, read from no Redis, is in force")
	}
	if err := src.fullResync(ctx, "periodic"); err != nil {
		t.Fatal(err)
	}
	held("after the next resync")
	if len(src.retained) != 2 {
		t.Errorf("the next resync retained %d rules, want early and the binding", len(src.retained))
	}
}

// afterScan is a go-redis hook that runs do each time a SCAN with MATCH
// pattern returns its last page (cursor 0), before the caller sees it.
type afterScan struct {
	pattern string
	do      func()
}

func (h afterScan) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterScan) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if sc, ok := cmd.(*redis.ScanCmd); ok && err == nil && slices.Contains(cmd.Args(), any(h.pattern)) {
			if _, cursor := sc.Val(); cursor == 0 {
				h.do()
			}
		}
		return err
	}
}

func (h afterScan) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// beforeRead is a go-redis hook that runs do before a pipeline that reads
// key (HGETALL) is sent.
type beforeRead struct {
	key string
	do  func()
}

func (h beforeRead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h beforeRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h beforeRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if a := cmd.Args(); len(a) == 2 && a[0] == "hgetall" && a[1] == h.key {
				h.do()
				break
			}
		}
		return next(ctx, cmds)
	}
}
