package rulestore

import (
	"fmt"
	"sync"
)

// Kind is a type of rule. Its name is the middle of the rule's Redis key
// (rate_limit:rule:<id>) and the end of its channel (gateway:rules:rate_limit).
type Kind uint8

const (
	RateLimit Kind = iota
	CircuitBreaker
	Gray
	Binding
	numKinds
)

var kindNames = [numKinds]string{"rate_limit", "circuit_breaker", "gray", "binding"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind maps a kind's name back to the Kind.
func ParseKind(name string) (Kind, bool) {
	for k, n := range kindNames {
		if n == name {
			return Kind(k), true
		}
	}
	return 0, false
}

// Kinds lists every kind, in a fixed order.
func Kinds() []Kind { return []Kind{RateLimit, CircuitBreaker, Gray, Binding} }

// Parser turns a rule's fields into its typed, validated value. It returns a
// *FieldError (via Fields.Errorf) for a bad field, so the message can name it.
type Parser func(id string, f Fields) (any, error)

var (
	parsersMu sync.RWMutex
	parsers   = [numKinds]Parser{Binding: parseBinding}
	// fieldNames are each kind's field names, for suggestions.
	fieldNames = [numKinds][]string{Binding: bindingFieldNames()}
)

// RegisterParser installs the parser for a kind. Handler packages call it from
// init, so the store validates their rules without importing them.
func RegisterParser(k Kind, p Parser) {
	parsersMu.Lock()
	defer parsersMu.Unlock()
	parsers[k] = p
}

// Parse validates fields as a rule of kind k and returns its typed value.
func Parse(k Kind, id string, f Fields) (any, error) {
	if k >= numKinds {
		return nil, fmt.Errorf("unknown rule kind %d", k)
	}
	if err := ValidID(id); err != nil {
		return nil, err
	}
	parsersMu.RLock()
	p := parsers[k]
	parsersMu.RUnlock()
	if p == nil {
		return nil, fmt.Errorf("no handler module for %s rules is compiled in", k)
	}
	v, err := p(id, f)
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
