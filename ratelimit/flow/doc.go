// Package flow holds the parts of flow shaping that need no rule: the
// wait of a paced request for its slot and the metrics of paced and
// adaptive rules. The schedule itself (pace, warm_up) is package
// ratelimit/engine's, the adaptive limit and its queue ratelimit/overload's;
// package ratelimit reads the rule and calls these (flow_*.go).
//
// It owns:
//
//   - a paced request's wait until its slot: on a Go timer until shortly
//     before it, the rest in the kernel's high-resolution sleep, ending
//     early when the client goes away (wait.go, wait_linux.go,
//     wait_other.go);
//   - the queue wait histogram of paced rules, one series per rule
//     (metrics.go);
//   - the adaptive limit's gauges and counters, read from its state at
//     scrape: the limit, minRTT, the queue and the shed requests by
//     priority class (metrics.go).
package flow
