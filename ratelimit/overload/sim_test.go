package overload

import (
	"math"
	"math/rand"
	"slices"
	"strconv"
)

// The controller's simulation: the controller alone, in simulated time, in
// front of a modelled host. The host is processor sharing with cpus units
// of work at once (a pool of workers, or the CPUs a gateway shares with a
// fast upstream): a job's work progresses at min(1, cpus/active) per unit
// of time, so beyond cpus jobs every one slows down in proportion, as a
// queue would make it. One run is deterministic for its seed.

const (
	us  = int64(1e3)
	ms  = int64(1e6)
	sec = int64(1e9)
)

type simStep struct{ at, cpus int64 }

// simSource is one kind of traffic: closed-loop clients (each sends again
// at once when answered or refused) or an open-loop rate (each request
// sent once, a refused one lost).
type simSource struct {
	class   Class
	keys    int     // the source's requests spread over this many keys
	clients int     // closed loop
	rate    float64 // open loop, requests per second
}

type simModel struct {
	sources []simSource
	work    int64   // a request's mean work (ns of one cpu)
	noise   float64 // its coefficient of variation (log-normal)
	cpus    []simStep
	// refuseWork > 0: a refusal is work on the same host (the gateway
	// shares its CPUs with the upstream), a share of a request's.
	refuseWork float64
	dur        int64
	cfg        Config
}

type simReq struct {
	src, key  int
	sent      int64 // arrived at the gateway
	start     int64 // admitted
	work      float64
	refusal   bool
	ticket    Ticket
	w         *Waiter
	client    int // closed loop: the client that sends again; -1 open
	done      bool
	admitted  bool
	latencyUp int64
}

type simResult struct {
	asked, served, refused [Classes]int
	latency                [Classes][]int64 // end to end, served requests
	keyServed              map[int]int      // by key, sources' keys numbered globally
	bySource               map[int][]int64  // end-to-end latency of served requests, by source
	waitBySource           map[int][]int64  // of which the wait for a slot
	inflight               []float64        // mean active admitted jobs per second
	limits                 []int64
}

func (r *simResult) p99(c Class) int64 {
	s := r.latency[c]
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return s[len(s)*99/100]
}

func p99Of(s []int64) int64 {
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return s[len(s)*99/100]
}

func (r *simResult) total(a [Classes]int) int {
	n := 0
	for _, v := range a {
		n += v
	}
	return n
}

// simulate runs m with the controller (nil: no limit at all) from time 0.
func simulate(m simModel, seed int64, withLimit bool) simResult {
	rng := rand.New(rand.NewSource(seed))
	step := min(max(m.work/200, 20*us), 2*ms)
	sigma := math.Sqrt(math.Log(1 + m.noise*m.noise))
	workOf := func() float64 {
		return float64(m.work) * math.Exp(sigma*rng.NormFloat64()-sigma*sigma/2)
	}
	var c *Controller
	if withLimit {
		c = New(m.cfg, 0)
	}
	res := simResult{keyServed: map[int]int{}, bySource: map[int][]int64{}, waitBySource: map[int][]int64{}}
	var (
		active  []*simReq // jobs on the host
		waiting []*simReq // in the controller's queue
		due     []*simReq // closed-loop sends due
		area    float64
		next    = make([]float64, len(m.sources)) // open loop: next arrival
	)
	keyBase := make([]int, len(m.sources))
	for i, s := range m.sources {
		if i > 0 {
			keyBase[i] = keyBase[i-1] + m.sources[i-1].keys
		}
		for k := 0; k < s.clients; k++ {
			due = append(due, &simReq{src: i, key: keyBase[i] + k%max(s.keys, 1), client: k, sent: rng.Int63n(max(m.work, 1))})
		}
		if s.rate > 0 {
			next[i] = rng.ExpFloat64() / s.rate * float64(sec)
		}
	}
	cpus := func(now int64) int64 {
		k := int64(1)
		for _, s := range m.cpus {
			if now >= s.at {
				k = s.cpus
			}
		}
		return k
	}
	key := make([]byte, 0, 16)
	admit := func(r *simReq, now int64) {
		r.start, r.admitted, r.work = now, true, workOf()
		active = append(active, r)
	}
	refuse := func(r *simReq, now int64) {
		res.refused[m.sources[r.src].class]++
		if m.refuseWork > 0 {
			active = append(active, &simReq{src: r.src, key: r.key, client: r.client, refusal: true, work: m.refuseWork * float64(m.work), sent: now})
			return
		}
		if m.sources[r.src].clients > 0 {
			due = append(due, &simReq{src: r.src, key: r.key, client: r.client, sent: now})
		}
	}
	arrive := func(r *simReq, now int64) {
		cl := m.sources[r.src].class
		res.asked[cl]++
		if c == nil {
			admit(r, now)
			return
		}
		if t, ok := c.TryAcquire(); ok {
			r.ticket = t
			admit(r, now)
			return
		}
		key = strconv.AppendInt(key[:0], int64(r.key), 10)
		t, w, out := c.Enqueue(cl, key, now)
		switch out {
		case Admitted:
			r.ticket = t
			admit(r, now)
		case Queued:
			r.w = w
			waiting = append(waiting, r)
		default:
			refuse(r, now)
		}
	}
	for now := int64(0); now < m.dur; now += step {
		// The host works.
		k := cpus(now)
		rate := math.Min(1, float64(k)/float64(max(len(active), 1)))
		kept := active[:0]
		var finished []*simReq
		for _, r := range active {
			r.work -= rate * float64(step)
			if r.work > 0 {
				kept = append(kept, r)
				continue
			}
			finished = append(finished, r)
		}
		active = kept
		for _, r := range finished {
			src := m.sources[r.src]
			if r.refusal {
				if src.clients > 0 {
					due = append(due, &simReq{src: r.src, key: r.key, client: r.client, sent: now})
				}
				continue
			}
			if c != nil {
				c.Release(r.ticket, now-r.start, false, now)
			}
			res.served[src.class]++
			res.keyServed[r.key]++
			res.latency[src.class] = append(res.latency[src.class], now-r.sent)
			res.bySource[r.src] = append(res.bySource[r.src], now-r.sent)
			res.waitBySource[r.src] = append(res.waitBySource[r.src], r.start-r.sent)
			if src.clients > 0 {
				due = append(due, &simReq{src: r.src, key: r.key, client: r.client, sent: now})
			}
		}
		// Waiters granted, pushed out or out of time.
		if c != nil {
			c.Tick(now)
			kw := waiting[:0]
			for _, r := range waiting {
				var t Ticket
				var out Outcome
				select {
				case <-r.w.Ready():
					t, out = c.Result(r.w)
				default:
					if now-r.w.Since() < m.cfg.MaxQueueWait {
						kw = append(kw, r)
						continue
					}
					t, out = c.Abandon(r.w)
				}
				r.w = nil
				if out == Admitted {
					r.ticket = t
					admit(r, now)
				} else {
					refuse(r, now)
				}
			}
			waiting = kw
		}
		// Arrivals.
		d := due
		due = nil
		for _, r := range d {
			if r.sent <= now {
				r.sent = now
				arrive(r, now)
			} else {
				due = append(due, r)
			}
		}
		for i, s := range m.sources {
			if s.rate <= 0 {
				continue
			}
			for next[i] <= float64(now) {
				arrive(&simReq{src: i, key: keyBase[i] + rng.Intn(max(s.keys, 1)), client: -1, sent: now}, now)
				next[i] += rng.ExpFloat64() / s.rate * float64(sec)
			}
		}
		n := 0
		for _, r := range active {
			if !r.refusal {
				n++
			}
		}
		area += float64(n) * float64(step)
		if (now+step)%sec < step {
			res.inflight = append(res.inflight, area/float64(sec))
			if c != nil {
				res.limits = append(res.limits, c.Limit())
			}
			area = 0
		}
	}
	return res
}
