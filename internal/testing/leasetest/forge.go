package leasetest

import (
	"math/rand/v2"
	"strings"

	"github.com/sluicehq/sluice"
)

// Forgeries returns lease IDs that a client who knows id might try in its
// place, to release or extend a lease that is not its own: id's
// neighbours (each byte one up and one down: the next and previous
// values of a counter), its prefixes and extensions, its other cases,
// and random IDs of every length from 0 to sluice.MaxLeaseIDLen+1 in
// several alphabets (base64url, hex, digits, any byte, UTF-8). None is
// id. Those of length 0 or above MaxLeaseIDLen are not valid IDs: a
// store refuses them with sluice.ErrInvalidRequest. The random ones are
// the same on every call.
func Forgeries(id string) []string {
	var out []string
	for i := range len(id) {
		b := []byte(id)
		b[i]++
		out = append(out, string(b))
		b[i] -= 2
		out = append(out, string(b))
	}
	for n := range len(id) {
		out = append(out, id[:n])
	}
	out = append(out, id+"0", id+"\x00", "0"+id, strings.ToUpper(id), strings.ToLower(id), " "+id, id+" ")
	rng := rand.New(rand.NewPCG(32, 2))
	for _, alphabet := range []string{
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
		"0123456789abcdef",
		"0123456789",
		"", // any byte
		"éß€𝄞",
	} {
		for n := range sluice.MaxLeaseIDLen + 2 {
			out = append(out, randomID(rng, alphabet, n))
		}
	}
	seen := map[string]bool{id: true}
	kept := out[:0]
	for _, f := range out {
		if !seen[f] {
			seen[f] = true
			kept = append(kept, f)
		}
	}
	return kept
}

// randomID returns n bytes of characters of alphabet (of any byte when
// it is empty), cut to n bytes.
func randomID(rng *rand.Rand, alphabet string, n int) string {
	var b strings.Builder
	chars := []rune(alphabet)
	for b.Len() < n {
		if len(chars) == 0 {
			b.WriteByte(byte(rng.Uint32()))
		} else {
			b.WriteRune(chars[rng.IntN(len(chars))])
		}
	}
	return b.String()[:n]
}
