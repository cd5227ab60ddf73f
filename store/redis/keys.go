package redis

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"

	"github.com/sluicehq/sluice"
)

// maxRawName is the longest Prefix+Key kept as it is in a key name;
// longer ones are replaced by their SHA-256, so a key of megabytes costs
// Redis a few dozen bytes.
const maxRawName = 256

// Key returns the name of the Redis key that holds the state of limit l
// for the actor named by prefix+key, as the Store writes it:
//
//	{tag}=prefix+key:stateid    or, for names over 256 bytes,
//	{tag}#base64(sha256(prefix+key)):stateid
//
// The tag is 8 hex digits of a hash of prefix+key. It comes first and
// holds no brace, so Redis Cluster hashes every key of one actor (all the
// limits of a policy) to one slot whatever bytes the actor's name holds.
// The stateid is l.StateID in 16 hex digits. Key is useful to inspect or
// delete an actor's state with redis-cli.
func Key(prefix, key string, l sluice.Limit) string {
	return string(appendKey(nil, prefix, key, l.StateID()))
}

// appendKey appends Key(prefix, key, l) for a limit of the given StateID.
func appendKey(dst []byte, prefix, key string, id uint64) []byte {
	h := fnv32(fnv32(2166136261, prefix), key)
	dst = append(dst, '{')
	dst = appendHex(dst, uint64(h), 8)
	dst = append(dst, '}')
	if len(prefix)+len(key) <= maxRawName {
		dst = append(dst, '=')
		dst = append(dst, prefix...)
		dst = append(dst, key...)
	} else {
		sum := sha256.New()
		sum.Write([]byte(prefix))
		sum.Write([]byte(key))
		dst = append(dst, '#')
		dst = base64.RawURLEncoding.AppendEncode(dst, sum.Sum(nil))
	}
	dst = append(dst, ':')
	return appendHex(dst, id, 16)
}

// fnv32 continues the 32-bit FNV-1a hash h over s.
func fnv32(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// appendHex appends the n low hex digits of v, zero-padded.
func appendHex(dst []byte, v uint64, n int) []byte {
	var buf [16]byte
	s := strconv.AppendUint(buf[:0], v, 16)
	for range n - len(s) {
		dst = append(dst, '0')
	}
	return append(dst, s[max(len(s)-n, 0):]...)
}
