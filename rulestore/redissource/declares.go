package redissource

import (
	"context"
	"github.com/sluicegw/sluice/rulestore"
	"sort"

	"github.com/redis/go-redis/v9"
)

// Declarations: with its heartbeat, every instance keeps a hash
// gateway:declares:<heartbeat member> listing the rules its config
// declares (field "<kind>/<id>"), and its name (field "@instance",
// host:pid), expiring with the heartbeat. An instance that does not
// declare a rule reads them to tell an overlay of a rule declared
// elsewhere (a rolling deploy that adds it, configs that differ by role)
// from an incomplete rule held only in Redis; a writer reads them to say
// which live instances lack the declaration.
const (
	declaresKeyPrefix = "gateway:declares:"
	declaresName      = "@instance"
)

func (s *redisSource) declaresKey(member string) string {
	return s.names.prefix + declaresKeyPrefix + member
}

func declaresField(k rulestore.Kind, id string) string { return k.String() + "/" + id }

// declaresFields are the hash fields of this instance's declarations: its
// name, and every rule of the newest started config.
func (s *redisSource) declaresFields() []any {
	out := []any{declaresName, rulestore.InstanceName()}
	if a := s.app.Load(); a != nil {
		for _, k := range rulestore.Kinds() {
			for id := range a.StaticRules(k) {
				out = append(out, declaresField(k, id), "1")
			}
		}
	}
	return out
}

// beatDeclares rewrites this instance's declarations with its heartbeat,
// in a transaction of their own (one key: one Redis Cluster slot), so no
// reader sees them half written.
func (s *redisSource) beatDeclares(ctx context.Context) error {
	key := s.declaresKey(s.instanceID)
	pipe := s.client.TxPipeline()
	pipe.Del(ctx, key)
	pipe.HSet(ctx, key, s.declaresFields()...)
	pipe.PExpire(ctx, key, heartbeatTTL)
	_, err := pipe.Exec(ctx)
	return err
}

// fleetDeclares is what the live instances declare.
type fleetDeclares []instanceDeclares

type instanceDeclares struct {
	member, name string
	rules        map[string]string
}

// readFleetDeclares reads the declarations of every live instance. A live
// instance without any (an older release) is left out: it is not known
// to lack anything.
func (s *redisSource) readFleetDeclares(ctx context.Context) (fleetDeclares, error) {
	live, err := s.liveMembers(ctx)
	if err != nil {
		return nil, err
	}
	members := make([]string, 0, len(live))
	for m := range live {
		members = append(members, m)
	}
	sort.Strings(members)
	pipe := s.client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(members))
	for i, m := range members {
		cmds[i] = pipe.HGetAll(ctx, s.declaresKey(m))
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, err
	}
	var out fleetDeclares
	for i, m := range members {
		h := cmds[i].Val()
		if len(h) == 0 {
			continue
		}
		out = append(out, instanceDeclares{member: m, name: h[declaresName], rules: h})
	}
	return out, nil
}

// split names the instances that declare rule id, other than member
// skip, and those that do not, sorted by name.
func (f fleetDeclares) split(k rulestore.Kind, id, skip string) (declare, lack []string) {
	field := declaresField(k, id)
	for _, d := range f {
		switch {
		case d.member == skip:
		case d.rules[field] != "":
			declare = append(declare, d.name)
		default:
			lack = append(lack, d.name)
		}
	}
	sort.Strings(declare)
	sort.Strings(lack)
	return declare, lack
}

// declaredLive reports whether another live instance declares rule id.
func (s *redisSource) declaredLive(k rulestore.Kind, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.timeout)
	defer cancel()
	f, err := s.readFleetDeclares(ctx)
	if err != nil {
		return false
	}
	declare, _ := f.split(k, id, s.instanceID)
	return len(declare) > 0
}

// lacking is App.lacking on declarations read once.
func (f fleetDeclares) lacking(k rulestore.Kind, id string) []string {
	declare, lack := f.split(k, id, "")
	if len(declare) == 0 {
		return nil
	}
	return lack
}

// usedHere reports whether a handler of this instance's config holds rule
// id: an incomplete overlay of it is rejected here even if another
// instance declares it, since this one would serve it.
func (s *redisSource) usedHere(k rulestore.Kind, id string) bool {
	a := s.app.Load()
	if a == nil {
		return false
	}
	return a.Uses(k, id)
}
