package redissource

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluicegw/sluice/rulestore"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// The fleet's last good version: when an instance accepts a rule version,
// it records the accepted raw fields in gateway:last_good:<kind>:<id>. An
// instance that starts (or resyncs) while the stored hash is rejected, and
// so holds no last good version of its own, serves that one: the rule the
// running instances serve, never the config's value or nothing. The key
// goes when the rule's hash is deleted.
const lastGoodKeyPrefix = "gateway:last_good:"

// LastGoodKey is the last good version of rule id of kind k.
func (n keyNames) LastGoodKey(k rulestore.Kind, id string) string {
	return n.prefix + lastGoodKeyPrefix + k.String() + ":" + id
}

// LastGood is the value of a last-good key: the raw fields an instance
// accepted, their version, who accepted them and when.
type LastGood struct {
	Version  string           `json:"version"`
	Fields   rulestore.Fields `json:"fields"`
	Instance string           `json:"instance"`
	At       time.Time        `json:"at"`
}

// lastGoodOp is one queued write of a last-good key.
type lastGoodOp struct {
	ref rulestore.RuleRef
	// mode: "set" (accepted: record it while the hash still holds these
	// fields), "keep" (rejected: record the version still in force unless
	// one is recorded) or "del" (deleted: drop it while the hash is absent).
	mode   string
	fields rulestore.Fields
}

// lastGoodScript writes a last-good key. KEYS[1] the rule hash, KEYS[2]
// the last-good key; ARGV mode, value, version, then the fields as name,
// value pairs. "set" writes only while the hash holds exactly those fields
// (an instance applying a change late never overwrites a newer one) and
// the key holds another version; "keep" writes only if the key is absent;
// "del" deletes only while the hash is absent.
var lastGoodScript = redis.NewScript(`
local mode = ARGV[1]
if mode == 'del' then
  if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]) end
  return 0
end
if mode == 'keep' then
  redis.call('SET', KEYS[2], ARGV[2], 'NX')
  return 0
end
local ok, cur = pcall(redis.call, 'HGETALL', KEYS[1])
if not ok or #cur ~= #ARGV - 3 then return 0 end
local held = {}
for i = 1, #cur, 2 do held[cur[i]] = cur[i + 1] end
for i = 4, #ARGV, 2 do
  if held[ARGV[i]] ~= ARGV[i + 1] then return 0 end
end
local prev = redis.call('GET', KEYS[2])
if prev then
  local dok, p = pcall(cjson.decode, prev)
  if dok and type(p) == 'table' and p['version'] == ARGV[3] then return 0 end
end
redis.call('SET', KEYS[2], ARGV[2])
return 1`)

// queueLastGood queues one last-good write for the next flush.
func (fb *feedback) queueLastGood(op lastGoodOp) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.lastGood) < maxFeedback { // bounded if Redis stays unwritable
		fb.lastGood = append(fb.lastGood, op)
	}
}

// pipeLastGood adds one last-good write to a pipeline. On a Redis Cluster
// the hash and the key are in different slots, so the writes there are
// unconditional.
func (s *redisSource) pipeLastGood(ctx context.Context, p redis.Pipeliner, op lastGoodOp) {
	key := s.names.LastGoodKey(op.ref.Kind, op.ref.ID)
	var value string
	if op.fields != nil {
		b, _ := json.Marshal(LastGood{Version: rulestore.Version(op.fields), Fields: op.fields, Instance: rulestore.InstanceName(), At: time.Now().UTC()})
		value = string(b)
	}
	if _, cluster := s.client.(*redis.ClusterClient); cluster {
		switch op.mode {
		case "del":
			p.Del(ctx, key)
		case "keep":
			p.SetNX(ctx, key, value, 0)
		default:
			p.Set(ctx, key, value, 0)
		}
		return
	}
	args := []any{op.mode, value, rulestore.Version(op.fields)}
	for _, name := range op.fields.Names() {
		args = append(args, name, op.fields[name])
	}
	lastGoodScript.Eval(ctx, p, []string{s.names.RuleKey(op.ref.Kind, op.ref.ID), key}, args...)
}

// recoverLastGood reads the fleet's last good version of rules whose
// stored hash was rejected while this instance held no version of its
// own, in one pipelined round trip, and returns those that validate here.
// A record that is not a last good version (garbled) is reported, never
// taken for "none". For a rule Redis gives no usable version of, the
// local snapshot's is served on the first load (diskseed.go); with none
// there either, the log says the rule is not in force.
func (s *redisSource) recoverLastGood(ctx context.Context, refs []rulestore.RuleRef) map[rulestore.RuleRef]*rulestore.Rule {
	if len(refs) == 0 {
		return nil
	}
	pipe := s.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(refs))
	for i, ref := range refs {
		cmds[i] = pipe.Get(ctx, s.names.LastGoodKey(ref.Kind, ref.ID))
	}
	pipe.Exec(ctx) // each command's error is read below
	out := map[rulestore.RuleRef]*rulestore.Rule{}
	for i, ref := range refs {
		key := s.names.LastGoodKey(ref.Kind, ref.ID)
		raw, err := cmds[i].Result()
		switch {
		case err == redis.Nil: // none recorded
		case err != nil:
			s.logger.Warn("cannot read the fleet's last good version", zap.String("last_good", key), zap.Error(err))
		default:
			if r := s.lastGoodRule(ref, key, raw); r != nil {
				out[ref] = r
				continue
			}
		}
		if f, ok := s.disk.rules[ref]; ok {
			r, err := s.diskRule(ref, f)
			if err == nil {
				s.logger.Warn("stored rule rejected and redis holds no usable last good version: serving the local snapshot's",
					zap.String("key", s.names.RuleKey(ref.Kind, ref.ID)), zap.String("version", rulestore.Version(f)),
					zap.String("path", s.disk.path))
				out[ref] = r
				continue
			}
			s.logger.Warn("the local snapshot's version does not validate here; not serving it",
				zap.String("key", s.names.RuleKey(ref.Kind, ref.ID)), zap.String("error", rulestore.Clip(err.Error(), 512)))
		}
		s.logger.Error("stored rule rejected and no good version of it is held here, in redis or in the local snapshot: the rule is not in force",
			zap.String("key", s.names.RuleKey(ref.Kind, ref.ID)), zap.String("last_good", key))
	}
	return out
}

// lastGoodRule reads one last-good record: the rule to serve, or nil. A
// garbled record is logged as an error and counted as a rejection once
// per value.
func (s *redisSource) lastGoodRule(ref rulestore.RuleRef, key, raw string) *rulestore.Rule {
	var lg LastGood
	reason := ""
	if err := json.Unmarshal([]byte(raw), &lg); err != nil {
		reason = "not JSON: " + err.Error()
	} else if len(lg.Fields) == 0 {
		reason = "no fields"
	} else if n := rulestore.RuleSize(lg.Fields); n > rulestore.MaxRuleBody {
		reason = fmt.Sprintf("%d bytes of fields, over the %d limit", n, rulestore.MaxRuleBody)
	}
	if reason != "" {
		if s.disk.garbled[ref] != raw {
			s.disk.garbled[ref] = raw
			s.status.rejected.Add(1)
			s.logger.Error("the fleet's last good version is garbled: not serving it",
				zap.String("last_good", key), zap.String("reason", rulestore.Clip(reason, 512)))
		}
		return nil
	}
	delete(s.disk.garbled, ref)
	st := s.staticRule(ref.Kind, ref.ID)
	v, _, err := rulestore.ParseOver(ref.Kind, ref.ID, st, lg.Fields)
	if err != nil {
		s.logger.Warn("the fleet's last good version does not validate here; not serving it",
			zap.String("key", s.names.RuleKey(ref.Kind, ref.ID)), zap.String("version", lg.Version),
			zap.String("error", rulestore.Clip(err.Error(), 512)))
		return nil
	}
	s.logger.Info("stored rule rejected: serving the fleet's last good version",
		zap.String("key", s.names.RuleKey(ref.Kind, ref.ID)), zap.String("version", lg.Version),
		zap.String("accepted_by", clip(lg.Instance)), zap.Time("accepted_at", lg.At))
	return &rulestore.Rule{Kind: ref.Kind, ID: ref.ID, Fields: lg.Fields, Value: v, Source: "redis", Overlay: lg.Fields, Partial: st != nil}
}
