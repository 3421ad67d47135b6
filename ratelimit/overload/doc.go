// Package overload is the adaptive in-flight limit of max_concurrent
// adaptive: a limit found from the upstream's latency, and a queue in
// front of it that holds requests over the limit until a slot frees,
// serves more important classes first and the keys of one class in turn,
// and refuses a request only when it waited max_queue_wait, when its key's
// queue stands beyond the target, or when the queue is full.
//
// Each part is in its own file:
//
//   - limit.go: the limit, after Envoy's adaptive concurrency filter. It
//     measures the uncontended latency (minRTT) at a reduced concurrency
//     now and then, and every sample window moves the limit by the
//     gradient minRTT×(1+tolerance)/latency plus a headroom of one request.
//   - queue.go: the waiting requests, five priority classes, round robin
//     between the keys of a class, push-out of the least important waiter
//     when full.
//   - codel.go: controlled delay: a key's queue that has not emptied for
//     100 ms has its waiters older than the target (minRTT) refused.
//   - share.go: fair shares: the slots a key with a standing queue holds
//     are on loan, and other keys' requests may take them over the limit.
//   - controller.go: admission and release, lock-free while the queue is
//     empty and a slot is free; the queue's lock otherwise.
//
// Plain Go without Caddy: times are nanoseconds from the caller's clock.
package overload
