package circuitbreaker

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

// The status page's views of keyed breakers: how many keys are open or
// half-open, every key (worst first, filtered and paged), and the rule's
// transitions of the last hour.
//
//	GET /sluice/ui/breaker_keys.json?rule=ID&q=TEXT&offset=N&limit=N

func init() { rulestore.RegisterStatusQuery("breaker_keys", queryKeys) }

// keyPageMax bounds one page of keys.
const keyPageMax = 500

// severity orders states worst first: open, half-open, forced, closed.
func severity(state string) int {
	switch state {
	case "open", "forced_open":
		return 0
	case "half_open":
		return 1
	case "closed":
		return 3
	}
	return 2
}

// worstFirst sorts keyed breakers worst state first, then by key.
func worstFirst(keys []BreakerState) {
	sort.Slice(keys, func(i, j int) bool {
		si, sj := severity(keys[i].State), severity(keys[j].State)
		if si != sj {
			return si < sj
		}
		return keys[i].Key < keys[j].Key
	})
}

// allKeys snapshots every keyed breaker of the rule (at most MaxKeys).
func (st *ruleState) allKeys() []BreakerState {
	snaps := st.keySnapshots(MaxKeys)
	out := make([]BreakerState, 0, len(snaps))
	for _, ks := range snaps {
		out = append(out, breakerState(ks.Key, ks.Snapshot))
	}
	return out
}

// KeyPage is one page of a rule's keyed breakers.
type KeyPage struct {
	// Rule is the rule's id.
	Rule string `json:"rule"`
	// Total counts the rule's keys.
	Total int `json:"total"`
	// Matched counts those matching q.
	Matched int `json:"matched"`
	// Offset is the page's first key among those matched.
	Offset int `json:"offset"`
	// Keys are the page's keyed breakers, worst first, then by key.
	Keys []BreakerState `json:"keys"`
}

func queryKeys(q url.Values) (any, error) {
	id := q.Get("rule")
	st, err := usedState(id)
	if err != nil {
		return nil, err
	}
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 || limit > keyPageMax {
		limit = 100
	}
	all := st.allKeys()
	page := KeyPage{Rule: id, Total: len(all), Keys: []BreakerState{}}
	text := strings.ToLower(q.Get("q"))
	matched := all[:0]
	for _, k := range all {
		if text == "" || strings.Contains(strings.ToLower(k.Key), text) || strings.Contains(k.State, text) {
			matched = append(matched, k)
		}
	}
	worstFirst(matched)
	page.Matched = len(matched)
	page.Offset = min(max(offset, 0), len(matched))
	page.Keys = append(page.Keys, matched[page.Offset:min(page.Offset+limit, len(matched))]...)
	return page, nil
}

// A rule keeps its transitions of the last transitionsKept, at most
// transitionsMax of them, across config reloads (with its breakers).
const (
	transitionsKept = time.Hour
	transitionsMax  = 200
)

// TransitionRecord is one state change as the status page lists it.
type TransitionRecord struct {
	// At is when the breaker changed state.
	At time.Time `json:"at"`
	// Key is a keyed breaker's key ("" for the rule's one breaker).
	Key string `json:"key,omitempty"`
	// From is the state it left.
	From string `json:"from"`
	// To is the state it entered.
	To string `json:"to"`
	// Reason says why (the trigger, a probe's result, an override).
	Reason string `json:"reason"`
}

// transitionLog is a rule's recent transitions, oldest first.
type transitionLog struct {
	mu   sync.Mutex
	list []TransitionRecord
}

func (l *transitionLog) add(r TransitionRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.list) >= transitionsMax {
		l.list = append(l.list[:0], l.list[1:]...)
	}
	l.list = append(l.list, r)
}

// recent returns the transitions of the last transitionsKept, newest first.
func (l *transitionLog) recent(now time.Time) []TransitionRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []TransitionRecord{}
	for i := len(l.list) - 1; i >= 0 && now.Sub(l.list[i].At) <= transitionsKept; i-- {
		out = append(out, l.list[i])
	}
	return out
}
