package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// workers is a service with a fixed capacity: -capacity requests are worked
// on at once, each for -work; the rest queue (first come, first served) and
// leave the queue when their client goes. So latency stays at -work while
// no more than capacity requests are in flight, and grows with the queue
// beyond: what a thread pool or a database connection pool does.
//
//	curl 127.0.0.1:9001/work                      # -work later
//	curl -X POST '127.0.0.1:9001/capacity?value=5' # halve a capacity of 10
//	curl 127.0.0.1:9001/stats                     # in flight, most per 10 ms
type workers struct {
	work  time.Duration
	sigma float64 // of the work time's logarithm (-work-cv; 0: fixed)

	mu       sync.Mutex
	capacity int
	busy     int
	queue    []chan struct{} // waiters, oldest first
	inFlight int             // busy + queued
	// Arrivals per 10 ms and per 100 ms slot: the current slot and the
	// most seen in one since the last reset.
	slot10, slot100   int64
	count10, count100 int
	max10, max100     int
	// Since the last reset: in flight over time (its integral, for the
	// mean), the most in flight, and each request's time in the service.
	since, changed time.Time
	area           float64 // in flight × seconds
	maxInFlight    int
	latencies      []time.Duration
}

func newWorkers(capacity int, work time.Duration, cv float64) *workers {
	now := time.Now()
	return &workers{capacity: capacity, work: work, sigma: math.Sqrt(math.Log1p(cv * cv)), since: now, changed: now}
}

// workTime is how long one request is worked on: -work, or with -work-cv
// a log-normal time of mean -work and that coefficient of variation (the
// adaptive limit's simulation draws its service times so).
func (k *workers) workTime() time.Duration {
	if k.sigma == 0 {
		return k.work
	}
	return time.Duration(float64(k.work) * math.Exp(k.sigma*rand.NormFloat64()-k.sigma*k.sigma/2))
}

func (k *workers) routes(mux *http.ServeMux) {
	mux.HandleFunc("/work", k.serve)
	mux.HandleFunc("POST /capacity", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("value"))
		if err != nil || n < 1 {
			http.Error(w, "want ?value=<n >= 1>", http.StatusBadRequest)
			return
		}
		k.mu.Lock()
		k.capacity = n
		k.dispatch()
		k.mu.Unlock()
		fmt.Fprintf(w, "capacity %d\n", n)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.account(time.Now())
		st := map[string]any{"capacity": k.capacity, "in_flight": k.inFlight, "busy": k.busy,
			"max_per_10ms": k.max10, "max_per_100ms": k.max100, "max_in_flight": k.maxInFlight,
			"mean_in_flight": k.area / time.Since(k.since).Seconds(), "served": len(k.latencies)}
		if n := len(k.latencies); n > 0 {
			lat := slices.Clone(k.latencies)
			slices.Sort(lat)
			st["p50_ms"] = lat[n/2].Milliseconds()
			st["p99_ms"] = lat[n*99/100].Milliseconds()
		}
		k.mu.Unlock()
		json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /stats/reset", func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.max10, k.max100, k.count10, k.count100 = 0, 0, 0, 0
		k.since, k.changed, k.area, k.maxInFlight, k.latencies = time.Now(), time.Now(), 0, k.inFlight, nil
		k.mu.Unlock()
	})
}

func (k *workers) serve(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	// Pulses are counted by when the gateway let the request go, when it
	// says so: a stall of this process must not make a pulse of its own.
	sent, err := strconv.ParseInt(r.Header.Get("X-Sent-At"), 10, 64)
	if err != nil {
		sent = arrival.UnixMilli()
	}
	k.mu.Lock()
	k.arrived(sent)
	k.account(arrival)
	k.inFlight++
	k.maxInFlight = max(k.maxInFlight, k.inFlight)
	turn := make(chan struct{}, 1)
	k.queue = append(k.queue, turn)
	k.dispatch()
	k.mu.Unlock()
	served := false
	defer func() {
		now := time.Now()
		k.mu.Lock()
		k.account(now)
		k.inFlight--
		if served {
			k.latencies = append(k.latencies, now.Sub(arrival))
		}
		k.dispatch()
		k.mu.Unlock()
	}()
	select {
	case <-turn:
	case <-r.Context().Done():
		k.mu.Lock()
		if k.leave(turn) {
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		<-turn // dispatched meanwhile: give the worker back below
	}
	defer func() {
		k.mu.Lock()
		k.busy--
		k.mu.Unlock()
	}()
	work := k.workTime()
	select {
	case <-time.After(work):
		served = true
		fmt.Fprintf(w, "worked %v\n", work)
	case <-r.Context().Done():
	}
}

// dispatch hands free workers to the oldest waiters; k.mu is held.
func (k *workers) dispatch() {
	for k.busy < k.capacity && len(k.queue) > 0 {
		k.busy++
		k.queue[0] <- struct{}{}
		k.queue = k.queue[1:]
	}
}

// leave takes a waiter out of the queue; false if it was dispatched.
func (k *workers) leave(turn chan struct{}) bool {
	for i, c := range k.queue {
		if c == turn {
			k.queue = append(k.queue[:i], k.queue[i+1:]...)
			return true
		}
	}
	return false
}

// account adds the in-flight count since the last change to its integral.
func (k *workers) account(now time.Time) {
	k.area += float64(k.inFlight) * now.Sub(k.changed).Seconds()
	k.changed = now
}

func (k *workers) arrived(ms int64) {
	if s := ms / 10; s != k.slot10 {
		k.slot10, k.count10 = s, 0
	}
	if s := ms / 100; s != k.slot100 {
		k.slot100, k.count100 = s, 0
	}
	k.count10++
	k.count100++
	k.max10, k.max100 = max(k.max10, k.count10), max(k.max100, k.count100)
}
