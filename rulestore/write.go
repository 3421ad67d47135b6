package rulestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// changeLogLength caps the change log (XADD MAXLEN ~).
const changeLogLength = 10000

// maxRuleBody bounds a rule written through the admin API.
const maxRuleBody = 64 << 10

// writeResult is the answer to a PUT or DELETE.
type writeResult struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Op      string `json:"op"` // upsert or delete
	Version string `json:"version,omitempty"`
	Fields  Fields `json:"fields,omitempty"`
	// Stored is where the change went: redis, or memory without Redis.
	Stored string `json:"stored"`
	Note   string `json:"note,omitempty"`
}

const memoryNote = "no redis configured: the change is held in this process's memory only " +
	"(kept across caddy reload, lost on restart, not shared with other instances)"

// serveWrite handles PUT and DELETE of one rule through the admin API.
func (a *App) serveWrite(w http.ResponseWriter, r *http.Request, k Kind, id string) error {
	if err := ValidID(id); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	res := writeResult{Kind: k.String(), ID: id, Op: "delete", Stored: "redis"}
	var f Fields
	var value any
	if r.Method == http.MethodPut {
		res.Op = "upsert"
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRuleBody+1))
		if err != nil || len(body) > maxRuleBody {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("rule body unreadable or over %d bytes", maxRuleBody)}
		}
		if err := json.Unmarshal(body, &f); err != nil {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("rule body: want a JSON object of fields: %v", err)}
		}
		if f == nil {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("rule body: want a JSON object of fields, got null")}
		}
		if value, err = Parse(k, id, f); err != nil {
			adminWrites.WithLabelValues(k.String(), res.Op, "invalid").Inc()
			emitRejected(k, id, "admin_api", err)
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
		}
		res.Fields, res.Version = f, Version(f)
	}

	if a.source == nil {
		res.Stored, res.Note = "memory", memoryNote
		if f != nil {
			memoryPut(&Rule{Kind: k, ID: id, Fields: f, Value: value, Source: "memory"})
		} else if !memoryDelete(k, id) {
			adminWrites.WithLabelValues(k.String(), res.Op, "not_found").Inc()
			return notFound("no %s rule %q in memory (rules from the config can only change with the config)", k, id)
		}
		adminWrites.WithLabelValues(k.String(), res.Op, "ok").Inc()
		a.logger.Info("rule written through the admin API", zap.String("kind", k.String()), zap.String("id", id),
			zap.String("op", res.Op), zap.String("stored", "memory"))
		emitUpdated(k, id, res.Op, "memory", f)
		return writeJSON(w, res)
	}
	if err := a.source.write(r.Context(), k, id, f); err != nil {
		adminWrites.WithLabelValues(k.String(), res.Op, "redis_error").Inc()
		return caddy.APIError{HTTPStatus: http.StatusBadGateway, Err: fmt.Errorf("writing to redis: %w", err)}
	}
	adminWrites.WithLabelValues(k.String(), res.Op, "ok").Inc()
	a.logger.Info("rule written through the admin API", zap.String("kind", k.String()), zap.String("id", id),
		zap.String("op", res.Op), zap.String("stored", "redis"))
	return writeJSON(w, res)
}

// write stores a rule (nil fields: deletes it), appends to the change log
// and publishes in one MULTI/EXEC: concurrent writers are serialised by
// Redis, so the hash and its change-log entry never disagree, and no reader
// sees a publish before the data or half a rule. The entry carries the
// rule's version and the publish time (published_at, unix ns) for the
// propagation-delay histogram.
//
// Redis Cluster cannot run one transaction over keys in different slots, so
// there the hash is replaced in its own MULTI/EXEC, then the entry is
// appended, then the id published: a reader still never sees a publish
// before the data, but two concurrent writers of one id may leave the last
// entry naming the other's version (the next write or resync heals it).
func (s *redisSource) write(ctx context.Context, k Kind, id string, f Fields) error {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	key := s.names.RuleKey(k, id)
	entry := map[string]any{"type": k.String(), "id": id, "op": "delete",
		"published_at": strconv.FormatInt(time.Now().UnixNano(), 10)}
	var args []any
	if f != nil {
		entry["op"], entry["version"] = "upsert", Version(f)
		args = make([]any, 0, 2*len(f))
		for name, v := range f {
			args = append(args, name, v)
		}
	}
	replace := func(p redis.Pipeliner) {
		p.Del(ctx, key)
		if f != nil {
			p.HSet(ctx, key, args...)
		}
	}
	xadd := &redis.XAddArgs{Stream: s.names.Stream(), MaxLen: changeLogLength, Approx: true, Values: entry}

	if _, cluster := s.client.(*redis.ClusterClient); !cluster {
		_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			replace(p)
			p.XAdd(ctx, xadd)
			p.Publish(ctx, s.names.Channel(k), id)
			return nil
		})
		return err
	}
	if _, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error { replace(p); return nil }); err != nil {
		return err
	}
	if err := s.client.XAdd(ctx, xadd).Err(); err != nil {
		return err
	}
	return s.client.Publish(ctx, s.names.Channel(k), id).Err()
}

// emitUpdated sends rule_updated for an applied change (f nil: a delete).
func emitUpdated(k Kind, id, op, source string, f Fields) {
	data := map[string]any{"kind": k.String(), "id": id, "op": op, "source": source}
	if f != nil {
		data["version"] = Version(f)
	}
	Emit(EventRuleUpdated, data)
}

// emitRejected sends rule_rejected for a rule that failed validation.
func emitRejected(k Kind, id, source string, err error) {
	field := ""
	var fe *FieldError
	if errors.As(err, &fe) {
		field = fe.Field
	}
	Emit(EventRuleRejected, map[string]any{"kind": k.String(), "id": id, "source": source, "field": field, "error": err.Error()})
}
