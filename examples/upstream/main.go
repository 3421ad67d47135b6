// Command upstream is a tiny stand-in service for the examples and the demo:
// it answers with its version and name, sleeps on /slow, fails on /fail, and
// can be made to fail (or recover) while it runs, so a circuit breaker in
// front of it has something to react to.
//
//	go run ./examples/upstream -addr 127.0.0.1:9001 -version v1
//	curl 127.0.0.1:9001/                       # v1 (upstream 127.0.0.1:9001)
//	curl 127.0.0.1:9001/slow                   # the same, after -delay
//	                                           # (-latency 80ms delays every answer on /)
//	curl 127.0.0.1:9001/fail                   # 500
//	curl -X POST '127.0.0.1:9001/fail-rate?value=1'   # from now on every request fails
//	curl -X POST '127.0.0.1:9001/fail-rate?value=0'   # healthy again
//	curl 127.0.0.1:9001/hits                   # requests answered on / and /slow so far
//	curl 127.0.0.1:9001/work                   # a service of -capacity workers (capacity.go)
//	                                           # (-work each; -work-cv 0.3 draws it log-normal)
//	curl -d '{"max_tokens":5}' 127.0.0.1:9001/v1/chat/completions   # an LLM API reporting usage (llm.go)
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9001", "listen address (keep it on loopback)")
	version := flag.String("version", "v1", "version to answer with")
	name := flag.String("name", "", "name to answer with (default: upstream <addr>)")
	delay := flag.Duration("delay", 2*time.Second, "how long /slow sleeps (/slow?d=500ms overrides it)")
	capacity := flag.Int("capacity", 10, "/work: requests worked on at once; the rest queue (change it live: POST /capacity?value=5)")
	work := flag.Duration("work", 100*time.Millisecond, "/work: how long one request is worked on")
	workCV := flag.Float64("work-cv", 0, "/work: the work time's coefficient of variation (log-normal, mean -work; 0: fixed)")
	latency := flag.Duration("latency", 0, "added to every answer on / (a slower version)")
	tokenDelay := flag.Duration("token-delay", 0, "/v1/chat/completions: pause between streamed chunks of 50 words")
	failRate := flag.Float64("fail-rate", 0, "share of requests answered 500, 0..1 (change it live: POST /fail-rate?value=0.5)")
	flag.Parse()
	if *name == "" {
		*name = "upstream " + *addr
	}
	if *workCV < 0 {
		log.Fatalf("-work-cv %v: want >= 0", *workCV)
	}
	if *failRate < 0 || *failRate > 1 {
		log.Fatalf("-fail-rate %v: want 0..1", *failRate)
	}

	u := &upstream{version: *version, name: *name, delay: *delay, latency: *latency, workers: newWorkers(*capacity, *work, *workCV), chat: &chat{tokenDelay: *tokenDelay}}
	u.setFailRate(*failRate)
	log.SetPrefix(*version + " ")
	log.Printf("listening on %s (delay %v, fail-rate %v)", *addr, *delay, *failRate)
	srv := &http.Server{Addr: *addr, Handler: u.routes(), ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type upstream struct {
	version, name string
	delay         time.Duration
	latency       time.Duration // added on /
	failRate      atomic.Uint64 // per mille of requests answered 500
	hits          atomic.Uint64 // requests to / and /slow
	workers       *workers      // /work, /capacity, /stats (capacity.go)
	chat          *chat         // /v1/chat/completions (llm.go)
}

func (u *upstream) setFailRate(r float64) { u.failRate.Store(uint64(r * 1000)) }

func (u *upstream) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fail-rate", func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.ParseFloat(r.URL.Query().Get("value"), 64)
		if err != nil || v < 0 || v > 1 {
			http.Error(w, "want ?value=<0..1>", http.StatusBadRequest)
			return
		}
		u.setFailRate(v)
		fmt.Fprintf(w, "%s: fail-rate %v\n", u.version, v)
	})
	mux.HandleFunc("GET /hits", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, u.hits.Load())
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		u.fail(w)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		d := u.delay
		if q := r.URL.Query().Get("d"); q != "" {
			if qd, err := time.ParseDuration(q); err == nil {
				d = qd
			}
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		u.answer(w, r)
	})
	u.workers.routes(mux)
	u.chat.routes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if u.latency > 0 {
			select {
			case <-time.After(u.latency):
			case <-r.Context().Done():
				return
			}
		}
		u.answer(w, r)
	})
	return mux
}

func (u *upstream) answer(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	if rate := u.failRate.Load(); rate > 0 && uint64(rand.IntN(1000)) < rate {
		u.fail(w)
		return
	}
	w.Header().Set("X-Upstream-Version", u.version)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	// The version first, so `curl` output reads "v2 (upstream ...)".
	fmt.Fprintf(w, "%s (%s)%s\n", u.version, u.name, targetNote(r))
}

func (u *upstream) fail(w http.ResponseWriter) {
	w.Header().Set("X-Upstream-Version", u.version)
	http.Error(w, u.version+": failing", http.StatusInternalServerError)
}

// targetNote shows the version grayroute asked for, when it reached us.
func targetNote(r *http.Request) string {
	if v := r.Header.Get("X-Target-Version"); v != "" {
		return " target=" + v
	}
	return ""
}
