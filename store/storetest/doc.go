// Package storetest is the conformance suite of [sluice.Store]: every
// store of this module runs it, and so should any third-party store.
//
// # Using it
//
// Call [Run] from a test of the store's package, with a function that
// returns a fresh store and registers its own cleanup:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) sluice.Store {
//			s := mystore.New(mystore.Config{Addr: addr})
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// A store that also decides many requests in one call (a DecideBatch
// method, see [BatchStore]) should run [RunBatch] as well, which runs the
// suite with every request inside a batch and checks random batches. A
// [sluice.Binder] should run [RunBinder], which runs the suite through
// Bounds.
//
// Run calls newStore once per subtest. A store backed by a shared server
// may hand out clients of one server: every subtest names its keys under
// a random prefix of its own, so the suite never needs the server to be
// empty and never flushes it. The suite takes a few seconds against a
// local Redis; run it with -race.
//
// # What it checks
//
// The package algorithm is the reference: on random traces of takes of
// random cost, peeks, refunds of earlier takes, resets and a clock that
// steps forward, jumps and sometimes steps back, the store must return
// exactly the decisions (Allowed, Limit, Remaining, ResetAfter,
// RetryAfter) that [algorithm.Decide] and [algorithm.RefundAll] give on a
// state kept in the test, for every algorithm and for multi-limit
// policies, with Decision.Time equal to Request.Now; a refund or a reset
// must answer what a peek just after would get, of the refund's cost or
// of 1 (see [sluice.Store]). The suite also checks
// bursts at one instant, invalid requests (which must fail with an error
// wrapping the sentinel of package sluice and leave the state untouched),
// peek, reset and refund, all-or-nothing policies, expiry, keys of any
// bytes and length, state shared by limits with the same
// [sluice.Limit.StateID], exact admission under 64 concurrent goroutines,
// a cancelled context, and the store's own clock when Request.Now is zero.
//
// # What a store must know
//
//   - The state of a limit is named by Prefix+Key (the concatenation, so
//     Prefix "a" with Key "bc" is the same actor as Prefix "ab" with Key
//     "c") and by the limit's StateID. Keys are any bytes, of any length.
//   - A Staggered fixed window's offset is [algorithm.Offset] of the limit
//     and of Prefix+Key.
//   - The state of a limit whose StateID is shared with a limit of another
//     Rate is reused; a sliding log's state is resized with [algorithm.Fit].
//   - Request times in the suite lie on a microsecond grid and every limit's
//     emission interval and sub-window width are whole microseconds, so a
//     store that keeps microseconds (as Redis does) can be exact.
//   - With Request.Now zero the store uses its own clock; the suite checks
//     that Decision.Time is within a minute of the test's clock, so the
//     store's clock must be the real time (not a fake clock).
//   - With a cancelled context, a store may return an error (wrapping
//     context.Canceled or sluice.ErrStore) or decide normally; it must not
//     panic, and must keep working for later requests.
package storetest
