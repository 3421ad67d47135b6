package redissource

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/rulestore"
)

// Previews across the fleet (rulestore.App.Impact): the asker publishes
// the query on gateway:preview; every instance subscribed replays its own
// record (rulestore.App.LocalImpact) and writes its answer as its field
// (host:pid) of the hash gateway:preview:<query id>, which expires
// previewTTL after the last answer. The asker waits until every live
// instance (heartbeats) answered or the query's wait ends, and sums the
// answers it found.
const (
	previewChannel   = "gateway:preview"
	previewKeyPrefix = "gateway:preview:"
	previewTTL       = time.Minute
	// previewPoll is how often the asker counts the answers.
	previewPoll = 20 * time.Millisecond
)

// previewQuery is the message on the preview channel.
type previewQuery struct {
	ID     string           `json:"id"` // names the answers' hash
	Kind   string           `json:"kind"`
	Rule   string           `json:"rule"`
	Fields rulestore.Fields `json:"fields"`
	Window string           `json:"window"`
}

// previewAnswer is one instance's field in the answers' hash.
type previewAnswer struct {
	Impact *replay.Impact `json:"impact,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// AskImpact publishes q to the fleet and sums the answers that come
// within q.Wait (rulestore.RedisSource).
func (s *redisSource) AskImpact(ctx context.Context, q rulestore.ImpactQuery) (replay.Impact, error) {
	live, err := s.liveMembers(ctx)
	if err != nil {
		return replay.Impact{}, err
	}
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	msg, _ := json.Marshal(previewQuery{ID: id, Kind: q.Kind.String(), Rule: q.ID, Fields: q.Fields, Window: q.Window.String()})
	if err := s.client.Publish(ctx, s.names.prefix+previewChannel, msg).Err(); err != nil {
		return replay.Impact{}, err
	}
	key := s.names.prefix + previewKeyPrefix + id
	asked := max(len(live), 1)
	if err := s.awaitAnswers(ctx, key, asked, q.Wait); err != nil {
		return replay.Impact{}, err
	}
	answers, err := s.client.HGetAll(ctx, key).Result()
	if err != nil {
		return replay.Impact{}, err
	}
	return sumAnswers(answers, q.Window, asked), nil
}

// awaitAnswers waits until key holds n answers or wait ends.
func (s *redisSource) awaitAnswers(ctx context.Context, key string, n int, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(previewPoll)
	defer tick.Stop()
	for {
		got, err := s.client.HLen(ctx, key).Result()
		switch {
		case ctx.Err() != nil:
			return nil // the wait is over: sum what came
		case err != nil:
			return err
		case got >= int64(n):
			return nil
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// sumAnswers merges the instances' answers (by name, so the sum's top
// keys do not depend on the order they came in); an instance that failed
// to replay counts as answered and names its error among the reasons.
func sumAnswers(answers map[string]string, window time.Duration, asked int) replay.Impact {
	sum := rulestore.EmptyImpact(window)
	sum.Instances = replay.Instances{Asked: asked}
	names := make([]string, 0, len(answers))
	for name := range answers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var a previewAnswer
		if err := json.Unmarshal([]byte(answers[name]), &a); err != nil || a.Impact == nil {
			if a.Error == "" {
				a.Error = "unreadable answer"
			}
			sum.Instances.Answered++
			sum.Approximate = append(sum.Approximate, "instance "+clip(name)+" did not replay: "+clip(a.Error))
			continue
		}
		sum.Merge(a.Impact)
	}
	sum.Instances.Asked = max(asked, sum.Instances.Answered)
	if sum.TopKeys == nil {
		sum.TopKeys = []replay.KeyImpact{}
	}
	return sum
}

// answerPreviews answers the fleet's preview queries until ctx ends,
// one at a time (a replay is CPU-bound).
func (s *redisSource) answerPreviews(ctx context.Context) {
	ps := s.client.Subscribe(ctx, s.names.prefix+previewChannel)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			s.answerPreview(ctx, m.Payload)
		}
	}
}

// answerPreview replays one query here and writes the answer.
func (s *redisSource) answerPreview(ctx context.Context, payload string) {
	var q previewQuery
	if err := json.Unmarshal([]byte(payload), &q); err != nil || q.ID == "" {
		s.logger.Debug("preview query unreadable", zap.String("payload", clip(payload)))
		return
	}
	var a previewAnswer
	app := s.app.Load()
	k, okKind := rulestore.ParseKind(q.Kind)
	window, err := time.ParseDuration(q.Window)
	switch {
	case app == nil:
		a.Error = "no config started"
	case !okKind || err != nil:
		a.Error = "unknown kind or window"
	default:
		imp, err := app.LocalImpact(rulestore.ImpactQuery{Kind: k, ID: q.Rule, Fields: q.Fields, Window: window})
		if err != nil {
			a.Error = err.Error()
		} else {
			a.Impact = &imp
		}
	}
	b, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	key := s.names.prefix + previewKeyPrefix + q.ID
	pipe := s.client.TxPipeline()
	pipe.HSet(ctx, key, rulestore.InstanceName(), b)
	pipe.PExpire(ctx, key, previewTTL)
	if _, err := pipe.Exec(ctx); err != nil && ctx.Err() == nil {
		s.logger.Warn("could not write a preview's answer to redis", zap.Error(err))
	}
}
