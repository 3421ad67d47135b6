package ratelimit

import (
	"math"
	"math/rand"
	"time"
)

// The adaptive limit's simulation: the controller alone (no Caddy, no wall
// clock) in front of a modelled upstream and closed-loop clients, in
// simulated time. One run is deterministic for its seed.

// simModel is one simulated deployment.
type simModel struct {
	clients int
	service int64   // the upstream's mean service time (ns)
	noise   float64 // the service time's coefficient of variation (log-normal)
	// capacity is the upstream's number of workers from each step's time
	// on (0: unlimited); a request beyond them waits in its FIFO queue.
	capacity []simStep
	// gatewayDelay: each request spends up to this long (uniform) inside
	// the gateway before it reaches the upstream, and as long again before
	// its answer is seen (the gateway's own work, scheduling).
	gatewayDelay int64
	// stallEvery, stallMax: the gateway stalls (a GC pause, the CPU taken
	// by other processes) on average every stallEvery for up to stallMax:
	// nothing is admitted and no answer is seen until it ends.
	stallEvery, stallMax int64
	// cancelShare of the requests have a client that gives up after 1 to 4
	// service times; the gateway frees its slot and observes nothing, the
	// upstream drops it from its queue but finishes it if it started.
	cancelShare float64
	dur         int64
	// openRate > 0 makes the load open-loop instead of clients: openBurst
	// requests at once, then openRate per second, each sent once whatever
	// the others meet (a flash sale); a refused request is not sent again.
	openRate  float64
	openBurst int
}

type simStep struct{ at, capacity int64 }

// simResult is what one run saw.
type simResult struct {
	admitted, refused int
	// inflight is the upstream's mean in flight (working and queued) in
	// each simulated second.
	inflight []float64
	limits   []int64 // the limit at the end of each second
	minRTTs  []int64 // minRTT at the end of each second
}

// refusedShare is the share of requests refused.
func (r simResult) refusedShare() float64 {
	return float64(r.refused) / float64(max(r.admitted+r.refused, 1))
}

type simReq struct {
	client        int
	n             int64 // in flight at the gateway when admitted
	sendAt        int64 // leaves the gateway for the upstream
	arrive        int64 // reached the upstream (0: not yet)
	done          int64 // the upstream finished it (0: not started)
	giveUp        int64 // the client cancels then (0: never)
	back          int64 // the answer reaches the gateway's controller
	started, gone bool  // started: a worker has it; gone: the gateway is done with it
}

// simulate runs m against g from now (ns) and returns what it saw.
func simulate(g *gradient, m simModel, seed, now int64) simResult {
	rng := rand.New(rand.NewSource(seed))
	step := min(max(m.service/100, 200*int64(time.Microsecond)), 5*ms)
	sigma := math.Sqrt(math.Log(1 + m.noise*m.noise))
	serviceTime := func() int64 {
		return int64(float64(m.service) * math.Exp(sigma*rng.NormFloat64()-sigma*sigma/2))
	}
	uniform := func(d int64) int64 {
		if d <= 0 {
			return 0
		}
		return rng.Int63n(d)
	}
	start := now
	if m.openRate > 0 { // one client per request, sending once
		m.clients = m.openBurst + int(m.openRate*float64(m.dur)/float64(sec))
	}
	due := make([]int64, m.clients) // when each idle client sends (-1: waiting for an answer)
	for i := range due {
		switch {
		case m.openRate == 0:
			due[i] = now + uniform(m.service)
		case i < m.openBurst:
			due[i] = now
		default:
			due[i] = now + int64(float64(i-m.openBurst+1)*float64(sec)/m.openRate)
		}
	}
	// again is when a client that was answered or refused at t sends next.
	again := func(t int64) int64 {
		if m.openRate > 0 {
			return -1
		}
		return t
	}
	// A client refused in the first round trip may wait for its step
	// (firstRoundWait), until waitUntil; then it asks once more (waited).
	waitUntil := make([]int64, m.clients)
	waited := make([]bool, m.clients)
	var (
		reqs                []*simReq // at the gateway or the upstream
		queue               []*simReq // the upstream's FIFO queue
		busy, gwIn, upIn    int64
		res                 simResult
		area                float64
		stallFrom, stallEnd int64
	)
	nextStall := now + uniform(2*m.stallEvery)
	capacity := func() int64 {
		c := int64(0)
		for _, s := range m.capacity {
			if now-start >= s.at {
				c = s.capacity
			}
		}
		return c
	}
	for end := now + m.dur; now < end; now += step {
		if m.stallEvery > 0 && now >= nextStall {
			stallFrom, stallEnd = now, now+m.stallMax/5+uniform(m.stallMax*4/5)
			nextStall = stallEnd + uniform(2*m.stallEvery)
		}
		stalled := now >= stallFrom && now < stallEnd
		c := capacity()
		// The upstream: finish, then start the queue's head.
		for _, r := range reqs {
			if r.started && r.done <= now && r.back == 0 {
				busy--
				upIn--
				r.back = now + uniform(m.gatewayDelay)
			}
		}
		for len(queue) > 0 && (c == 0 || busy < c) {
			r := queue[0]
			queue = queue[1:]
			busy++
			r.started, r.done = true, now+serviceTime()
		}
		kept := reqs[:0]
		for _, r := range reqs {
			switch {
			case r.gone:
				if r.started && r.back == 0 {
					kept = append(kept, r) // a cancelled request the upstream still works on
				}
				continue
			case stalled:
			case r.giveUp > 0 && now >= r.giveUp && r.back == 0:
				// The client gives up: the gateway frees the slot without
				// an observation; the upstream forgets it if queued.
				r.gone = true
				gwIn--
				due[r.client] = again(now)
				if !r.started && r.arrive > 0 {
					for i, q := range queue {
						if q == r {
							queue = append(queue[:i], queue[i+1:]...)
							upIn--
							break
						}
					}
				}
				if r.started {
					kept = append(kept, r)
				}
				continue
			case r.arrive == 0 && now >= r.sendAt:
				r.arrive = now
				upIn++
				queue = append(queue, r)
			case r.back > 0 && now >= r.back:
				g.observe(r.arrive, now, r.n, false)
				gwIn--
				due[r.client] = again(now)
				r.gone = true
				continue
			}
			kept = append(kept, r)
		}
		reqs = kept
		if !stalled {
			for i, d := range due {
				if d < 0 || d > now {
					continue
				}
				if waitUntil[i] > 0 {
					if g.inFirstRound() && now < waitUntil[i] {
						continue
					}
					waitUntil[i], waited[i] = 0, true
					g.doneWaiting()
				}
				if gwIn >= g.Limit() {
					g.refuse()
					if !waited[i] {
						if _, wait, ok := g.firstRoundWait(); ok {
							waitUntil[i] = now + wait
							continue
						}
					}
					res.refused++
					waited[i] = false
					due[i] = again(now + m.service) // a refusal costs the client an answer's time
					continue
				}
				waited[i] = false
				gwIn++
				res.admitted++
				r := &simReq{client: i, n: gwIn, sendAt: now + uniform(m.gatewayDelay)}
				if rng.Float64() < m.cancelShare {
					r.giveUp = now + m.service + uniform(3*m.service)
				}
				reqs = append(reqs, r)
				due[i] = -1
			}
		}
		area += float64(upIn) * float64(step)
		if (now-start+step)%sec < step {
			res.inflight = append(res.inflight, area/float64(sec))
			res.limits = append(res.limits, g.Limit())
			res.minRTTs = append(res.minRTTs, g.minRTT)
			area = 0
		}
	}
	return res
}
