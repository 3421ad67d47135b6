#!/usr/bin/env bash
# Makes both limits fleet-wide: the same rules with scope cluster, so every
# Caddy on this Redis counts a key's requests and tokens together. HSET each
# whole rule, then PUBLISH its id; every Caddy following this Redis applies
# it at once. REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
# redis_timeout 250ms: a model's answer takes seconds, so waiting longer
# than the default 50 ms on a slow Redis costs little, and each decision
# that would time out counts in memory (on_redis_error local) instead of
# against the fleet's budget.
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:llm_requests \
	limit_type sliding_window qps 1 window_size 1m \
	key_resolver '{http.request.header.Authorization}' scope cluster \
	redis_timeout 250ms
cli HSET rate_limit:rule:llm_tokens \
	quota 100000 period day timezone UTC \
	key_resolver '{http.request.header.Authorization}' \
	response_cost '{http.response.header.X-Tokens-Used}' \
	reserve 500 max_cost 4000 max_concurrent 4 scope cluster \
	redis_timeout 250ms
cli PUBLISH gateway:rules:rate_limit llm_requests
cli PUBLISH gateway:rules:rate_limit llm_tokens

# Back to the Caddyfile's rules: delete the Redis copies and publish.
#   cli DEL rate_limit:rule:llm_requests rate_limit:rule:llm_tokens
#   cli PUBLISH gateway:rules:rate_limit llm_requests
#   cli PUBLISH gateway:rules:rate_limit llm_tokens
