package redissource

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/sluicegw/sluice/rulestore"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// The loss fence. When Redis has lost its data (checkEpoch), every rule
// held is retained, and afterwards a writer deletes one with DEL and
// PUBLISH: a re-read that finds it absent deletes it. But a message
// published before the loss can still be on its way (in the socket, or
// taken by the receiver while the session was busy): re-read after the
// resync, it found the lost rule absent and deleted it (the intermittent
// TestRefreshAfterDataLossRetains, on a busy machine). So the session
// sends a PING with its own payload on the subscription once it found the
// loss; Redis answers it in order with the messages, so every message
// published before the PING comes before its pong. Until the pong, a
// retained rule read absent is kept; after it, absent is a delete again.
// A delete published in the few milliseconds between the loss and the
// PING is kept too: the safe side, as a retained rule is (publish it
// again).

// startFence starts a fence after a data loss was found.
func (s *redisSource) startFence() {
	var b [8]byte
	rand.Read(b[:])
	s.fence, s.fencePinged = "sluice-loss-fence-"+hex.EncodeToString(b[:]), false
}

// sendFence sends the fence's PING on the subscription if one is due.
func (s *redisSource) sendFence(ctx context.Context, ps *redis.PubSub) error {
	if s.fence == "" || s.fencePinged {
		return nil
	}
	s.fencePinged = true
	return ps.Ping(ctx, s.fence)
}

// onPong ends the fence when its PING is answered.
func (s *redisSource) onPong(payload string) {
	if s.fence != "" && payload == s.fence {
		s.fence = ""
		s.logger.Info("messages from before redis lost its data are all read: DEL and PUBLISH delete a retained rule again",
			zap.Int("retained", len(s.retained)))
	}
}

// keepLost reports whether a rule read absent is kept rather than deleted:
// it was retained after a data loss and the fence is still up.
func (s *redisSource) keepLost(ref rulestore.RuleRef) bool {
	return s.fence != "" && s.retained[ref]
}
