package rulestore

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicegw/sluice/rulestore/syntax"
)

// Kind is a type of rule: an index into the registered kinds. Its name is
// the middle of the rule's Redis key (rate_limit:rule:<id>), the end of its
// channel (gateway:rules:rate_limit) and its segment of the admin API's
// paths; a Kind's number is not part of any contract.
type Kind uint8

// The built-in kinds, registered by this package in this order. The store
// handles every kind the same way; these are names for handlers and tests.
const (
	RateLimit Kind = iota
	CircuitBreaker
	Gray
	Binding
)

// KindInfo describes a kind of rule to the store: what RegisterKind takes.
type KindInfo struct {
	// Name is the kind's name in Redis keys and channels, the admin API,
	// the change log and the config: lower-case letters, digits and _.
	Name string
	// NewSpec returns an empty typed rule of the kind. Its fields' json
	// names are the kind's field names (see Spec).
	NewSpec func() Spec
	// Parse validates a rule of the kind. It may be left nil and set later
	// with RegisterParser (by the handler package that runs the kind).
	Parse Parser
	// FieldNames are offered as suggestions for a misspelled field; the
	// Spec's field names when empty.
	FieldNames []string
	// KeyPrefix is the start of a rule's Redis hash key before its id;
	// "<Name>:rule:" when empty.
	KeyPrefix string
	// Fields are the kind's field table as its handler declares it (see
	// RegisterFields); nil for a kind without one.
	Fields []FieldInfo

	// renamed maps a field still read under an old name to the name to
	// use, from the Spec's renamed tags (see specRenamed).
	renamed map[string]string
}

// kindRegistry holds the registered kinds, filled from init functions like
// the other registries (registry.go). Readers load an immutable slice
// without a lock; a registration publishes a new one.
type kindRegistry struct {
	mu   sync.Mutex
	list atomic.Pointer[[]KindInfo]
}

var registeredKinds = newKindRegistry(
	KindInfo{Name: "rate_limit", NewSpec: func() Spec { return new(RateLimitSpec) }},
	KindInfo{Name: "circuit_breaker", NewSpec: func() Spec { return new(CircuitBreakerSpec) }},
	KindInfo{Name: "gray", NewSpec: func() Spec { return new(GraySpec) }},
	KindInfo{Name: "binding", NewSpec: func() Spec { return new(BindingSpec) }, Parse: parseBinding,
		FieldNames: bindingFieldNames(), KeyPrefix: bindingKeyPrefix},
)

func newKindRegistry(builtin ...KindInfo) *kindRegistry {
	r := new(kindRegistry)
	for _, info := range builtin {
		r.register(info)
	}
	return r
}

func (r *kindRegistry) all() []KindInfo { return *r.list.Load() }

func (r *kindRegistry) register(info KindInfo) Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var cur []KindInfo
	if p := r.list.Load(); p != nil {
		cur = *p
	}
	if err := checkKindInfo(info, cur); err != nil {
		panic(err)
	}
	if info.KeyPrefix == "" {
		info.KeyPrefix = info.Name + ":rule:"
	}
	info.renamed = specRenamed(info.NewSpec())
	next := append(cur[:len(cur):len(cur)], info)
	r.list.Store(&next)
	return Kind(len(cur))
}

// update changes a registered kind's entry in place of a copy.
func (r *kindRegistry) update(k Kind, change func(*KindInfo)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := append([]KindInfo(nil), *r.list.Load()...)
	if int(k) >= len(next) {
		panic(fmt.Sprintf("rulestore: kind %d is not registered", k))
	}
	change(&next[k])
	r.list.Store(&next)
}

func checkKindInfo(info KindInfo, registered []KindInfo) error {
	if len(registered) > 255 {
		return fmt.Errorf("rulestore: too many rule kinds")
	}
	if info.Name == "" || info.NewSpec == nil {
		return fmt.Errorf("rulestore: a kind needs a name and NewSpec")
	}
	for i := 0; i < len(info.Name); i++ {
		if c := info.Name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("rulestore: kind name %q: want lower-case letters, digits and _", info.Name)
		}
	}
	for _, k := range registered {
		if k.Name == info.Name {
			return fmt.Errorf("rulestore: kind %q registered twice", info.Name)
		}
	}
	return nil
}

// RegisterKind adds a kind of rule to the store and returns it. A package
// that defines a kind calls it from init, as Caddy modules call
// caddy.RegisterModule: the kind's rules are then read from Redis, the admin
// API and the config (the app's rules field, or `<name> <id> { ... }` in the
// Caddyfile's rulestore block) like the built-in kinds'. It panics on a
// name already taken or not valid.
func RegisterKind(info KindInfo) Kind { return registeredKinds.register(info) }

func (k Kind) Info() (KindInfo, bool) {
	all := registeredKinds.all()
	if int(k) < len(all) {
		return all[k], true
	}
	return KindInfo{}, false
}

func (k Kind) String() string {
	if info, ok := k.Info(); ok {
		return info.Name
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind maps a kind's name back to the Kind.
func ParseKind(name string) (Kind, bool) {
	for k, info := range registeredKinds.all() {
		if info.Name == name {
			return Kind(k), true
		}
	}
	return 0, false
}

// Kinds lists every registered kind, in the order they were registered.
func Kinds() []Kind {
	out := make([]Kind, len(registeredKinds.all()))
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// kindNames are the registered kinds' names, in order.
func kindNames() []string {
	all := registeredKinds.all()
	names := make([]string, len(all))
	for k, info := range all {
		names[k] = info.Name
	}
	return names
}

// NumKinds is the number of registered kinds, the size of the store's
// per-kind tables.
func NumKinds() int { return len(registeredKinds.all()) }

// ByKind returns m's entry for kind k, or the zero value when m has none
// (an App built without Provision, or a kind registered after m was made).
func ByKind[T any](m []T, k Kind) T {
	if int(k) < len(m) {
		return m[k]
	}
	var zero T
	return zero
}

// Parser turns a rule's fields into its typed, validated value. It returns a
// *FieldError (via Fields.Errorf) for a bad field, so the message can name it.
type Parser func(id string, f Fields) (any, error)

// RegisterParser installs the parser for a kind. Handler packages call it from
// init, so the store validates their rules without importing them.
func RegisterParser(k Kind, p Parser) {
	registeredKinds.update(k, func(info *KindInfo) { info.Parse = p })
}

// FieldInfo is one row of a kind's field table (the handler's fields.go):
// the Syntax and Default its docs' reference table shows, a numeric
// field's Bounds, and the other fields it Needs to apply.
type FieldInfo struct {
	Name, Syntax, Default string
	Bounds                *syntax.Bounds
	Needs                 Fields
}

// RegisterFields records kind k's field table; handler packages call it
// from init, beside RegisterParser. It panics when the table's names are
// not the Spec's: the two are one list.
func RegisterFields(k Kind, rows []FieldInfo) {
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	if spec := SpecFieldNames(k); !sameNames(spec, names) {
		panic(fmt.Sprintf("rulestore: %s's field table %v is not its Spec's fields %v", k, names, spec))
	}
	registeredKinds.update(k, func(info *KindInfo) { info.Fields = rows })
}

// KindFields are kind k's field table, in its docs' order (nil when its
// handler has none, or is not compiled in).
func KindFields(k Kind) []FieldInfo {
	info, _ := k.Info()
	return info.Fields
}

// sameNames reports whether a and b hold the same names, in any order.
func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Parse validates fields as a rule of kind k and returns its typed value.
func Parse(k Kind, id string, f Fields) (any, error) {
	info, ok := k.Info()
	if !ok {
		return nil, fmt.Errorf("unknown rule kind %d", k)
	}
	if err := ValidID(id); err != nil {
		return nil, err
	}
	if info.Parse == nil {
		return nil, fmt.Errorf("no handler module for %s rules is compiled in", k)
	}
	v, err := info.Parse(id, f)
	if err != nil {
		return nil, suggestField(k, err)
	}
	return v, nil
}

// MaxIDLength bounds rule ids and route names.
const MaxIDLength = 128

// ValidID accepts ids of letters, digits and . _ - : up to MaxIDLength bytes,
// but not . or .., so an id is always safe in a key, a log line and a URL.
func ValidID(id string) error {
	if id == "" {
		return fmt.Errorf("empty rule id")
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("rule id longer than %d bytes", MaxIDLength)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("rule id %q: not allowed (a path segment, it cannot be named in a URL)", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-', c == ':':
		default:
			return fmt.Errorf("rule id %q: character %q not allowed (use letters, digits, . _ - :)", id, c)
		}
	}
	return nil
}

// bindingKeyPrefix is the Redis hash of a route's binding:
// gateway:binding:<route>, after the configured prefix.
const bindingKeyPrefix = "gateway:binding:"
