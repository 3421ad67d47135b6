package overload

// waiter is one request waiting for a slot.
type waiter struct {
	prev, next *waiter
	kq         *keyQueue
	ks         *keyState // its key's account (share.go)
	class      Class
	since      int64 // when it began to wait (ns)
	// ready gets one value when the waiter leaves the queue other than by
	// its own abandon: state says whether it holds a slot or was pushed
	// out.
	ready  chan struct{}
	state  waitState
	ticket Ticket // the slot it was granted
}

type waitState uint8

const (
	waiting waitState = iota
	granted
	pushedOut
	abandoned
)

// keyQueue is one key's waiters of one class, oldest first, and its place
// in the class's round of keys.
type keyQueue struct {
	key        string
	ks         *keyState // the key's account (share.go)
	since      int64     // when it last became non-empty (a fresh key queue)
	head, tail *waiter
	n          int64
	prev, next *keyQueue
}

// classQueue is one class's waiters: a round of the keys with waiters,
// served one request per key in turn, so a key with many waiters gets no
// more slots than one with few.
type classQueue struct {
	keys map[string]*keyQueue
	turn *keyQueue // the key served next; nil when empty
	n    int64
}

// queue holds the waiters of all classes. Not safe for concurrent use:
// the controller's lock guards it.
type queue struct {
	classes [Classes]classQueue
	n       int64
	free    []*keyQueue
}

func (q *queue) push(w *waiter, key string) {
	cq := &q.classes[w.class]
	if cq.keys == nil {
		cq.keys = make(map[string]*keyQueue)
	}
	kq := cq.keys[key]
	if kq == nil {
		kq = q.newKeyQueue(key)
		kq.since, kq.ks = w.since, w.ks
		cq.keys[key] = kq
		if cq.turn == nil {
			kq.prev, kq.next = kq, kq
			cq.turn = kq
		} else { // last in the round: just before the key served next
			kq.prev, kq.next = cq.turn.prev, cq.turn
			kq.prev.next, cq.turn.prev = kq, kq
		}
	}
	w.kq, w.prev, w.next = kq, kq.tail, nil
	if kq.tail != nil {
		kq.tail.next = w
	} else {
		kq.head = w
	}
	kq.tail = w
	kq.n++
	cq.n++
	q.n++
}

func (q *queue) newKeyQueue(key string) *keyQueue {
	if n := len(q.free); n > 0 {
		kq := q.free[n-1]
		q.free = q.free[:n-1]
		kq.key = key
		return kq
	}
	return &keyQueue{key: key}
}

// pop takes the next waiter: the most important class first, and in it
// the oldest waiter of the key whose turn it is.
func (q *queue) pop() *waiter {
	for c := range q.classes {
		cq := &q.classes[c]
		if cq.turn == nil {
			continue
		}
		w := cq.turn.head
		cq.turn = cq.turn.next // the next key's turn, whatever happens to this one
		q.remove(w)
		return w
	}
	return nil
}

// scanKeys bounds how many keys popNotStanding looks at: a round of
// thousands of standing keys would make every release walk it.
const scanKeys = 64

// popNotStanding takes, in the most important class waiting, the oldest
// waiter of the first key in turn whose queue does not stand (share.go);
// the round goes on after that key. nil when none of the first scanKeys
// keys qualifies.
func (q *queue) popNotStanding() *waiter {
	cq := q.head()
	if cq == nil {
		return nil
	}
	k := cq.turn
	for range scanKeys {
		if !k.ks.standing {
			w := k.head
			cq.turn = k.next
			q.remove(w)
			return w
		}
		if k = k.next; k == cq.turn {
			break
		}
	}
	return nil
}

// head is the most important class with waiters, or nil.
func (q *queue) head() *classQueue {
	for c := range q.classes {
		if q.classes[c].turn != nil {
			return &q.classes[c]
		}
	}
	return nil
}

// remove takes w out of the queue wherever it is.
func (q *queue) remove(w *waiter) {
	kq := w.kq
	cq := &q.classes[w.class]
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		kq.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		kq.tail = w.prev
	}
	w.prev, w.next, w.kq = nil, nil, nil
	kq.n--
	cq.n--
	q.n--
	if kq.n > 0 {
		return
	}
	delete(cq.keys, kq.key)
	if kq.next == kq {
		cq.turn = nil
	} else {
		kq.prev.next, kq.next.prev = kq.next, kq.prev
		if cq.turn == kq {
			cq.turn = kq.next
		}
	}
	*kq = keyQueue{}
	q.free = append(q.free, kq)
}

// victim is the waiter to push out so that a request of class c and key
// may wait in a full queue, or nil: the newcomer itself is the least
// important (a less important class waits, or in its own class the key
// with the most waiters is the newcomer's). Within the class it pushes
// out the newest waiter of the key with the most.
func (q *queue) victim(c Class, key string) *waiter {
	for v := Classes - 1; v >= int(c); v-- {
		cq := &q.classes[v]
		if cq.turn == nil {
			continue
		}
		fat := cq.turn
		for k := cq.turn.next; k != cq.turn; k = k.next {
			if k.n > fat.n {
				fat = k
			}
		}
		if v == int(c) {
			own := int64(0)
			if kq := cq.keys[key]; kq != nil {
				own = kq.n
			}
			if own+1 > fat.n || fat.key == key {
				return nil
			}
		}
		return fat.tail
	}
	return nil
}
