package redissource

import (
	"context"
	"github.com/sluicegw/sluice/rulestore"

	"github.com/redis/go-redis/v9"
)

// patchScript sets some fields of a rule hash if others still hold the
// expected values, then (full = "1") appends to the change log and
// publishes, all in one atomic step, so many instances deciding the same
// verdict at once write it exactly once. A field missing from the hash
// counts as its static value (the rule declared in the config), which the
// caller passes along.
//
// KEYS: hash, stream. ARGV: n, then n × (field, expected, static), m, then
// m × (field, value), full, channel, id, maxlen, then the entry's pairs.
var patchScript = redis.NewScript(`
local n = tonumber(ARGV[1])
local i = 2
for _ = 1, n do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if not cur then cur = ARGV[i+2] end
  if cur ~= ARGV[i+1] then return 0 end
  i = i + 3
end
local m = tonumber(ARGV[i])
i = i + 1
local hset = {}
for _ = 1, m do
  hset[#hset+1] = ARGV[i]
  hset[#hset+1] = ARGV[i+1]
  i = i + 2
end
redis.call('HSET', KEYS[1], unpack(hset))
if ARGV[i] == '1' then
  local channel, id, maxlen = ARGV[i+1], ARGV[i+2], ARGV[i+3]
  local entry = {}
  for j = i + 4, #ARGV do entry[#entry+1] = ARGV[j] end
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxlen, '*', unpack(entry))
  redis.call('PUBLISH', channel, id)
end
return 1
`)

// Patch is App.Patch in Redis: only the patched fields are written to the
// hash (HSET), with the change log and the publish in the same script.
func (s *redisSource) Patch(ctx context.Context, p rulestore.PatchRequest) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	k, id, static, expect, patch := p.Kind, p.ID, p.Static, p.Expect, p.Patch
	args := []any{len(expect)}
	for name, want := range expect {
		var def string
		if static != nil {
			def = static.Fields[name]
		}
		args = append(args, name, want, def)
	}
	args = append(args, len(patch))
	for name, v := range patch {
		args = append(args, name, v)
	}
	_, cluster := s.client.(*redis.ClusterClient)
	// The change log names the version of the hash as patched: the one
	// version id (the stored fields), not the effective rule's.
	entry := changeLogEntry(k, id, rulestore.MergeFields(p.Current.Overlay, patch))
	if cluster {
		args = append(args, "0")
	} else {
		args = append(args, "1", s.names.Channel(k), id, changeLogLength)
		args = append(args, entry...)
	}
	keys := []string{s.names.RuleKey(k, id), s.names.Stream()}
	if cluster {
		keys = keys[:1]
	}
	n, err := patchScript.Run(ctx, s.client, keys, args...).Int()
	if err != nil || n == 0 {
		return false, err
	}
	if cluster {
		// One transaction cannot span slots: log and publish after the
		// data, as write does.
		if err := s.client.XAdd(ctx, s.changeLogAdd(entry)).Err(); err != nil {
			return true, err
		}
		return true, s.client.Publish(ctx, s.names.Channel(k), id).Err()
	}
	return true, nil
}
