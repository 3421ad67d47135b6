package cluster

import "github.com/redis/go-redis/v9"

// KeySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag (what lies between the first '{' and the first '}' after it, if not
// empty) or else of the whole key, modulo 16384. The batcher groups a
// batch's keys by it, since one script call may only name keys of one slot.
func KeySlot(key string) uint16 {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return crc16(key) & 16383
			}
		}
		break
	}
	return crc16(key) & 16383
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// OneSlot reports whether one script may name all of keys: always on a
// single Redis, on a Redis Cluster only when they share a hash slot.
func OneSlot(c redis.UniversalClient, keys []string) bool {
	if _, cluster := c.(*redis.ClusterClient); !cluster {
		return true
	}
	s := KeySlot(keys[0])
	for _, k := range keys[1:] {
		if KeySlot(k) != s {
			return false
		}
	}
	return true
}
