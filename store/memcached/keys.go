package memcached

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
)

// maxPlainName is the longest actor name used in keys as it is; the
// suffixes take at most 52 more bytes, under memcached's 250.
const maxPlainName = 160

// keyName returns the form of an actor's name (Prefix+Key) used in every
// memcached key of that actor and for its placement on the ring: the name
// itself when it is short and made of printable ASCII other than space,
// and otherwise '#' followed by the unpadded base64url of its SHA-256. A
// plain name never starts with '#', so the two forms never meet.
func keyName(name string) string {
	if len(name) <= maxPlainName && (name == "" || name[0] != '#') {
		plain := true
		for i := 0; i < len(name); i++ {
			if c := name[i]; c <= ' ' || c > '~' {
				plain = false
				break
			}
		}
		if plain {
			return name
		}
	}
	sum := sha256.Sum256([]byte(name))
	return "#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// The keys of one limit's state for one actor, read from the right so
// that a name holding '|' cannot make two of them equal:
//
//	name|sid|h          head of a counter limit: "gen:newest"
//	name|sid|gen|index  one window's or sub-window's counter
//	name|sid|s          encoded state of a GCRA or sliding log limit
//
// sid is the limit's StateID in 16 hex digits, gen the counters'
// generation in base 36, index a window number in decimal.

func limitBase(name string, sid uint64) string {
	b := make([]byte, 0, len(name)+18)
	b = append(b, name...)
	b = append(b, '|')
	b = appendHex16(b, sid)
	return string(b)
}

func appendHex16(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xf])
	}
	return b
}

func headKey(base string) string  { return base + "|h" }
func stateKey(base string) string { return base + "|s" }

func bucketKey(base string, gen uint64, index int64) string {
	b := make([]byte, 0, len(base)+36)
	b = append(b, base...)
	b = append(b, '|')
	b = strconv.AppendUint(b, gen, 36)
	b = append(b, '|')
	b = strconv.AppendInt(b, index, 10)
	return string(b)
}
