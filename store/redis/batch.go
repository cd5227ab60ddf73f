package redis

import (
	"context"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice"
)

// maxPerCall bounds the requests one script call decides, so that a large
// batch does not hold Redis, which runs one script at a time, for long:
// a larger batch on one node takes several calls, still in one round trip.
const maxPerCall = 64

// A grouping says which requests one script call may decide together:
// those whose keys all live on one server, and on a Cluster in one slot.
type grouping uint8

const (
	oneNode grouping = iota // a single server (or Sentinel): any requests
	bySlot                  // Redis Cluster: requests of one hash slot
	byTag                   // go-redis Ring, which shards by hash tag: requests of one tag
)

// of returns the group of the requests whose first key is key.
func (g grouping) of(key string) uint32 {
	switch g {
	case bySlot:
		return uint32(slot(key))
	case byTag:
		tag, _ := strconv.ParseUint(key[1:9], 16, 32) // see appendKey
		return uint32(tag)
	}
	return 0
}

// slot returns the Redis Cluster hash slot of a key the Store names: the
// CRC16 of its hash tag, which every such key has (see Key), mod 16384.
func slot(key string) uint16 {
	var crc uint16
	for i := 1; i < 9; i++ { // the tag: 8 hex digits after '{'
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & 16383
}

// DecideBatch decides many requests, for any keys, in one round trip per
// Redis server they live on: each is decided atomically on its own, as
// Decide would, and ds[i], errs[i] answer rs[i].
//
// Takes and peeks under GCRA limits and fixed windows only that
// follow one another on one server (on a Cluster, in one hash slot) are
// decided in one script call, up to 64 a call, in their order, and those
// without a Request.Now at one reading of the server's clock: one call
// costs Redis less than one per request, whose lookup, argument parsing,
// reply and clock reading are a large part of a GCRA decision. Other
// requests, which cost the script much more, get a call each in the same
// round trip. The requests stay independent: one that is denied or fails
// changes nothing for the others.
func (s *Store) DecideBatch(ctx context.Context, rs []sluice.Request) (ds []sluice.Decision, errs []error) {
	ds, errs = make([]sluice.Decision, len(rs)), make([]error, len(rs))
	encoded := make([]call, len(rs))
	valid := make([]int, 0, len(rs))
	for i := range rs {
		if errs[i] = check(&rs[i]); errs[i] != nil {
			continue
		}
		keys, args := s.encode(&rs[i])
		encoded[i] = call{keys: keys, args: args, n: 1, batchable: batchable(&rs[i])}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return ds, errs
	}
	order, replies := s.roundTrip(ctx, encoded, valid)
	for j, i := range order {
		ds[i], errs[i] = decodeReply(&rs[i], replies[j].v, replies[j].err)
	}
	return ds, errs
}

// roundTrip decides the encoded requests at the indexes valid in script
// calls planned by plan, in one round trip per server, and returns the
// replies with the request each answers.
func (s *Store) roundTrip(ctx context.Context, encoded []call, valid []int) (order []int, replies []reply) {
	calls, order := s.plan(encoded, valid)
	replies = make([]reply, len(order))
	s.c.evalMulti(ctx, calls, replies)
	for _, c := range calls {
		if c.pooled != nil { // the client copied the keys and arguments
			putList(c.pooled)
		}
	}
	return order, replies
}

// lists recycles the lists of keys and arguments of batches, which live
// for one round trip (the client copies them into its commands): some 16
// bytes per key and argument of every request they decide.
var lists sync.Pool // of *[]string

// getList returns a list of at least n strings from lists.
func getList(n int) *[]string {
	p, _ := lists.Get().(*[]string)
	if p == nil {
		p = new([]string)
	}
	if cap(*p) < n {
		*p = make([]string, n)
	}
	return p
}

// putList clears a list of getList and puts it back.
func putList(p *[]string) {
	clear((*p)[:cap(*p)])
	lists.Put(p)
}

// plan groups the encoded requests at the indexes valid into script
// calls, and returns them with the request each reply answers, in the
// order of the calls' replies. Within a group, consecutive requests the
// script decides for less in a batch are merged, up to perCall a call;
// any other request gets a call of its own, between them, so
// that the requests of one key keep their order.
func (s *Store) plan(encoded []call, valid []int) (calls []call, order []int) {
	order = make([]int, 0, len(valid))
	var run []int
	flush := func() {
		if len(run) > 0 {
			calls = append(calls, merge(encoded, run))
			order = append(order, run...)
			run = run[:0]
		}
	}
	add := func(group []int) {
		for _, i := range group {
			if !encoded[i].batchable {
				flush()
				calls = append(calls, encoded[i])
				order = append(order, i)
				continue
			}
			if run = append(run, i); len(run) == s.perCall {
				flush()
			}
		}
		flush()
	}
	if s.batching == oneNode {
		add(valid)
		return calls, order
	}
	groups := map[uint32][]int{}
	var firsts []uint32 // the groups in the order of their first request
	for _, i := range valid {
		g := s.batching.of(encoded[i].keys[0])
		if _, ok := groups[g]; !ok {
			firsts = append(firsts, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range firsts {
		add(groups[g])
	}
	return calls, order
}

// batchable reports whether the script decides r for less in a batch than
// in a call of its own: a take or a peek under GCRA limits and fixed
// windows only, which the script's fast paths decide in a few
// microseconds, so that the cost of a call (and of reading TIME) is a
// large part of it. (Under sluice serve's gRPC load of one fixed window,
// batches of 3.4 on average cut Redis's time in EVALSHA per decision from
// 11.4 to 9.7 µs.) The other requests cost the script tens of
// microseconds, and a batch of them measured no saving: 36–41 µs of Redis
// CPU per decision either way, for a policy of a fixed window, a sliding
// window and a sliding log.
func batchable(r *sluice.Request) bool {
	if r.Op != sluice.OpTake && r.Op != sluice.OpPeek {
		return false
	}
	for _, l := range r.Limits {
		if l.Algorithm != sluice.GCRA && l.Algorithm != sluice.FixedWindow {
			return false
		}
	}
	return true
}

// merge returns one call deciding the encoded requests at the indexes in
// part: a call of its own for one request, a batch for more (each
// request's packed argument after "b", see batch.lua).
func merge(encoded []call, part []int) call {
	if len(part) == 1 {
		return encoded[part[0]]
	}
	nk := 0
	for _, i := range part {
		nk += len(encoded[i].keys)
	}
	na := 1 + len(part)
	p := getList(nk + na)
	list := (*p)[:nk+na]
	c := call{keys: list[:0:nk], args: list[nk : nk+1 : nk+na], n: len(part), pooled: p}
	c.args[0] = "b"
	for _, i := range part {
		e := &encoded[i]
		c.keys = append(c.keys, e.keys...)
		c.args = append(c.args, e.args[1]) // after "p"
	}
	return c
}
