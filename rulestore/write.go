package rulestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
)

// changeLogLength caps the change log (XADD MAXLEN ~).
const changeLogLength = 10000

// maxRuleBody bounds a rule written through the admin API.
const maxRuleBody = 64 << 10

// serveWrite handles PUT and DELETE of one rule through the admin API.
func (a *App) serveWrite(w http.ResponseWriter, r *http.Request, k Kind, id string) error {
	if r.Method != http.MethodPut && r.Method != http.MethodDelete {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	if err := ValidID(id); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	if a.source == nil {
		return caddy.APIError{HTTPStatus: http.StatusConflict,
			Err: errors.New("no redis configured: rules come from the config only; change it and reload")}
	}
	if r.Method == http.MethodDelete {
		if err := a.source.write(r.Context(), k, id, nil); err != nil {
			return caddy.APIError{HTTPStatus: http.StatusBadGateway, Err: err}
		}
		return writeJSON(w, map[string]any{"kind": k.String(), "id": id, "deleted": true, "stored": "redis"})
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRuleBody+1))
	if err != nil || len(body) > maxRuleBody {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("rule body unreadable or over %d bytes", maxRuleBody)}
	}
	var f Fields
	if err := json.Unmarshal(body, &f); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("rule body: want a JSON object of fields: %v", err)}
	}
	if _, err := Parse(k, id, f); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	if err := a.source.write(r.Context(), k, id, f); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadGateway, Err: err}
	}
	return writeJSON(w, map[string]any{"kind": k.String(), "id": id, "fields": f, "stored": "redis"})
}

// write stores a rule (nil fields: deletes it), appends to the change log
// and publishes, in that order, so a reader never sees a publish before the
// data. The hash is replaced in one MULTI/EXEC, so no reader sees half a rule.
func (s *redisSource) write(ctx context.Context, k Kind, id string, f Fields) error {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	key := s.names.RuleKey(k, id)
	op := "delete"
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		if f != nil {
			op = "upsert"
			args := make([]any, 0, 2*len(f))
			for name, v := range f {
				args = append(args, name, v)
			}
			p.HSet(ctx, key, args...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.client.XAdd(ctx, &redis.XAddArgs{Stream: s.names.Stream(), MaxLen: changeLogLength, Approx: true,
		Values: map[string]any{"type": k.String(), "id": id, "op": op}}).Err(); err != nil {
		return err
	}
	return s.client.Publish(ctx, s.names.Channel(k), id).Err()
}
