package redissource

import (
	"github.com/sluicegw/sluice/rulestore"
	"strings"
)

// The Redis contract. Every name below is preceded by the configured prefix.
const (
	channelPrefix = "gateway:rules:" // channel gateway:rules:<kind>, message = id
	streamName    = "gateway:rules"  // durable change log: fields type, id, op
	epochKey      = "gateway:rules:epoch"
)

// keyNames maps the prefix-free names of the contract for one namespace.
type keyNames struct{ prefix string }

// RuleKey is the Redis hash that holds rule id of kind k.
func (n keyNames) RuleKey(k rulestore.Kind, id string) string {
	info, _ := k.Info()
	return n.prefix + info.KeyPrefix + id
}

// Channel is where changes of kind k are published.
func (n keyNames) Channel(k rulestore.Kind) string { return n.prefix + channelPrefix + k.String() }

// Stream is the durable change log.
func (n keyNames) Stream() string { return n.prefix + streamName }

// Epoch is the marker key whose disappearance means Redis lost its data.
func (n keyNames) Epoch() string { return n.prefix + epochKey }

// pattern is the SCAN pattern for every rule of kind k.
func (n keyNames) pattern(k rulestore.Kind) string { return n.RuleKey(k, "*") }

// parseKey maps a rule key back to its kind and id.
func (n keyNames) parseKey(key string) (rulestore.Kind, string, bool) {
	rest, ok := strings.CutPrefix(key, n.prefix)
	if !ok {
		return 0, "", false
	}
	for _, k := range rulestore.Kinds() {
		if id, ok := strings.CutPrefix(rest, strings.TrimPrefix(n.RuleKey(k, ""), n.prefix)); ok && id != "" {
			return k, id, true
		}
	}
	return 0, "", false
}

// parseChannel maps a channel back to its kind.
func (n keyNames) parseChannel(ch string) (rulestore.Kind, bool) {
	name, ok := strings.CutPrefix(ch, n.prefix+channelPrefix)
	if !ok {
		return 0, false
	}
	return rulestore.ParseKind(name)
}
