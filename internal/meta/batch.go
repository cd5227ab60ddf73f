package meta

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// MaxKeyLen is the longest key memcached accepts.
const MaxKeyLen = 250

// maxRelativeTTL is the longest expiry memcached reads as relative; a
// larger number is a Unix time.
const maxRelativeTTL = 30 * 24 * 60 * 60

// NoExpiry, as the ttl of a command that stores, keeps the item until
// memcached evicts or deletes it.
const NoExpiry time.Duration = -1

// ErrInvalidKey means a command was given a key memcached would reject:
// empty, longer than MaxKeyLen, or holding a byte outside '!'..'~'.
var ErrInvalidKey = errors.New("meta: invalid key")

// A Batch is a list of meta commands sent in one write and answered in
// one read: a pipeline. Append commands with its methods, pass it to
// Client.Do, then read Replies, one per command in order.
//
// The zero value is an empty batch. A Batch is not safe for concurrent
// use; Reset it to reuse its buffers.
type Batch struct {
	buf     []byte
	n       int
	err     error
	Replies []Reply
	vals    []byte // backing store of every Reply.Value
}

// Reset empties b, keeping its buffers.
func (b *Batch) Reset() {
	b.buf = b.buf[:0]
	b.n = 0
	b.err = nil
	b.Replies = b.Replies[:0]
	b.vals = b.vals[:0]
}

// Len returns the number of commands in b.
func (b *Batch) Len() int { return b.n }

// Err returns the first invalid command's error, if any. Do refuses to
// send a batch with an error, so no invalid command reaches a server.
func (b *Batch) Err() error { return b.err }

// Get appends "mg key v", which answers VA with the value, or EN.
func (b *Batch) Get(key string) {
	b.cmd("mg ", key)
	b.buf = append(b.buf, " v\r\n"...)
}

// GetCAS appends "mg key v c", which also returns the item's CAS token.
func (b *Batch) GetCAS(key string) {
	b.cmd("mg ", key)
	b.buf = append(b.buf, " v c\r\n"...)
}

// Token appends "mg key c", answered HD with the item's CAS token, or EN:
// a version of the item that changes with every write, read without its
// value. Like any mg without u, it marks the item as recently used.
func (b *Batch) Token(key string) {
	b.cmd("mg ", key)
	b.buf = append(b.buf, " c\r\n"...)
}

// Bump appends "mg key", answered HD or EN: a read that marks the item as
// recently used in memcached's LRU, which arithmetic (ma, incr) does not.
func (b *Batch) Bump(key string) {
	b.cmd("mg ", key)
	b.buf = append(b.buf, "\r\n"...)
}

// Exists appends "mg key u", answered HD or EN: whether the item is
// there, without marking it as used (u), so that looking does not change
// what memcached evicts next.
func (b *Batch) Exists(key string) {
	b.cmd("mg ", key)
	b.buf = append(b.buf, " u\r\n"...)
}

// IncrCreate appends an atomic create-or-increment: "ma key N<ttl>
// J<delta> D<delta> v". A missing item is created holding delta with the
// given time to live; an existing one is incremented by delta and keeps
// its expiry. Either way the reply is VA with the new value.
func (b *Batch) IncrCreate(key string, delta uint64, ttl time.Duration) {
	b.cmd("ma ", key)
	b.buf = append(b.buf, " N"...)
	b.buf = appendTTL(b.buf, ttl)
	b.buf = append(b.buf, " J"...)
	b.buf = strconv.AppendUint(b.buf, delta, 10)
	b.buf = append(b.buf, " D"...)
	b.buf = strconv.AppendUint(b.buf, delta, 10)
	b.buf = append(b.buf, " v\r\n"...)
}

// Decr appends "ma key MD D<delta>": memcached decrements, stopping at
// zero, and answers HD, or NF when the item is missing.
func (b *Batch) Decr(key string, delta uint64) {
	b.cmd("ma ", key)
	b.buf = append(b.buf, " MD D"...)
	b.buf = strconv.AppendUint(b.buf, delta, 10)
	b.buf = append(b.buf, "\r\n"...)
}

// Add appends "ms key <len> T<ttl> ME c": store value only if key is
// missing. The reply is HD with the new item's CAS token, or NS when the
// key exists.
func (b *Batch) Add(key string, value []byte, ttl time.Duration) {
	b.set(key, value, ttl)
	b.buf = append(b.buf, " ME c\r\n"...)
	b.data(value)
}

// CompareAndSet appends "ms key <len> T<ttl> C<cas> c": store value only
// if the item's CAS token is still cas. The reply is HD with the new CAS
// token, EX when another write came first, or NF when the item is gone.
func (b *Batch) CompareAndSet(key string, value []byte, ttl time.Duration, cas uint64) {
	b.set(key, value, ttl)
	b.buf = append(b.buf, " C"...)
	b.buf = strconv.AppendUint(b.buf, cas, 10)
	b.buf = append(b.buf, " c\r\n"...)
	b.data(value)
}

// Set appends "ms key <len> T<ttl>": store value unconditionally. The
// reply is HD.
func (b *Batch) Set(key string, value []byte, ttl time.Duration) {
	b.set(key, value, ttl)
	b.buf = append(b.buf, "\r\n"...)
	b.data(value)
}

// Delete appends "md key", answered HD, or NF when the key is missing.
func (b *Batch) Delete(key string) {
	b.cmd("md ", key)
	b.buf = append(b.buf, "\r\n"...)
}

func (b *Batch) set(key string, value []byte, ttl time.Duration) {
	b.cmd("ms ", key)
	b.buf = append(b.buf, ' ')
	b.buf = strconv.AppendInt(b.buf, int64(len(value)), 10)
	b.buf = append(b.buf, " T"...)
	b.buf = appendTTL(b.buf, ttl)
}

func (b *Batch) data(value []byte) {
	b.buf = append(b.buf, value...)
	b.buf = append(b.buf, "\r\n"...)
}

// cmd appends the verb and key of a command, checking the key.
func (b *Batch) cmd(verb, key string) {
	if err := CheckKey(key); err != nil && b.err == nil {
		b.err = fmt.Errorf("command %d: %w", b.n, err)
	}
	b.n++
	b.buf = append(b.buf, verb...)
	b.buf = append(b.buf, key...)
}

// CheckKey reports whether memcached accepts key in a text or meta
// command: 1 to MaxKeyLen bytes, each a printable ASCII byte other than
// space.
func CheckKey(key string) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: length %d is not 1 to %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: byte %#x at %d", ErrInvalidKey, c, i)
		}
	}
	return nil
}

// appendTTL writes d rounded up to whole seconds, at least one (zero
// would mean "never expires"), or zero for NoExpiry. Past 30 days
// memcached reads the number as a Unix time, so longer expiries are
// written as one, by the local clock.
func appendTTL(dst []byte, d time.Duration) []byte {
	if d == NoExpiry {
		return append(dst, '0')
	}
	secs := int64((d + time.Second - 1) / time.Second)
	secs = max(secs, 1)
	if secs > maxRelativeTTL {
		secs += time.Now().Unix()
	}
	return strconv.AppendInt(dst, secs, 10)
}
