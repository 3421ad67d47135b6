# The two commands of the README:
#   make run   builds Caddy with Sluice (xcaddy) if a source changed and
#              serves examples/Caddyfile (make run PORT=8081 ADMIN=2020)
#   make test  installs what the tests need and runs them all
.PHONY: run build test test-short bench vet demo

SLUICE_REDIS ?= redis://127.0.0.1:6379
export SLUICE_REDIS

# make run's ports: the gateway's and the admin API's.
PORT ?= 8080
ADMIN ?= 2019

# bin/caddy is rebuilt only when a file it is built from is newer.
SOURCES := $(shell find . -name '*.go' -not -path './bin/*' -not -path './.git/*') go.mod go.sum xcaddy/build.sh

bin/caddy: $(SOURCES)
	./xcaddy/build.sh

run: bin/caddy
	@GATEWAY_PORT=$(PORT) ADMIN_PORT=$(ADMIN) scripts/run-example.sh

build:
	./xcaddy/build.sh

test:
	./scripts/ensure-redis.sh
	./scripts/ensure-chromium.sh
	./scripts/ensure-prometheus.sh
	./scripts/ensure-hey.sh
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	@rm -rf bin/reports && mkdir -p bin/reports
	@# The examples measure what a user's gateway does (pulses, in flight,
	@# p99 at a 100 ms scale) with Caddy in the test process: under the race
	@# detector each request costs several times the CPU, and a busy box
	@# then turns the figures into the detector's. Every package's own
	@# tests, their real-Caddy ones included, run under -race.
	SLUICE_REPORT_DIR=$(CURDIR)/bin/reports go test -race -count=1 -timeout 30m $$(go list ./... | grep -v '/examples$$')
	SLUICE_REPORT_DIR=$(CURDIR)/bin/reports go test -count=1 -timeout 20m ./examples ./ratelimit/overload
	@# go test shows a passing test's log only with -v: the tables the tests printed
	@for f in bin/reports/*.txt; do [ -f "$$f" ] && cat "$$f"; done; true

# Unit tests only: no Redis, no Caddy.
test-short:
	go test -short ./...

bench:
	./scripts/bench.sh

# A guided tour of the full chain on loopback: Redis (if installed), two
# upstreams and Caddy, started and stopped by the script.
demo: build
	@scripts/demo.sh

# The fault and abuse suite, long version (docs/reliability.md): longer load
# phases, more reloads, keys and rules; then a short fuzz run of each target.
# (The short version runs in `make test`.)
.PHONY: soak
soak:
	./scripts/ensure-redis.sh
	SLUICE_SOAK=1 go test -race -count=1 -timeout 60m -v ./faults/
	for f in FuzzRuleFields FuzzKey FuzzCaddyfile; do go test -run '^$$' -fuzz "^$$f$$" -fuzztime 30s ./faults/ || exit 1; done

# Refreshes docs/img/status.png (the README's picture of the status page),
# status-desktop.png and status-phone.png (390 px) from the status page's
# browser tests.
.PHONY: screenshot
screenshot:
	./scripts/ensure-redis.sh
	./scripts/ensure-chromium.sh
	mkdir -p docs/img
	SLUICE_SCREENSHOT=$(CURDIR)/docs/img/status.png SLUICE_SCREENSHOT_DIR=$(CURDIR)/docs/img go test -count=1 -run '^TestStatusPage(InBrowser|Findings)$$' -v ./rulestore/uitest/
