package memcached

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/meta"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestCorruptValues overwrites each kind of item with something that is
// not what the store wrote: every request on it fails with an error
// wrapping sluice.ErrCorruptState, and nothing panics.
func TestCorruptValues(t *testing.T) {
	srv := testserver.StartMemcached(t)
	s := newStore(t, Config{Addrs: []string{srv.Addr}})
	raw := meta.New(meta.Config{Addr: srv.Addr})
	defer raw.Close()
	fixed := sluice.Limit{Rate: 5, Period: time.Hour, Algorithm: sluice.FixedWindow}
	gcra := sluice.Limit{Rate: 5, Period: time.Hour}
	logL := sluice.Limit{Rate: 5, Period: time.Hour, Algorithm: sluice.SlidingLog}
	for _, tc := range []struct {
		name  string
		limit sluice.Limit
		key   func(base string) string
		value string
	}{
		{"head not gen:newest", fixed, headKey, "garbage"},
		{"head numbers too big", fixed, headKey, "1:99999999999999999999999"},
		{"head newest out of range", fixed, headKey, "0:9223372036854775807"},
		{"head newest negative", fixed, headKey, "0:-5"},
		{"counter not a number", fixed, func(base string) string { return bucketKey(base, 0, floorDiv(t0.UnixNano(), int64(time.Hour))) }, "abc"},
		{"gcra state garbage", gcra, stateKey, "\x01\x00\xff\xff\xff"},
		{"gcra state of another algorithm", gcra, stateKey, "\x01\x04\x01\x00"},
		{"log state truncated", logL, stateKey, "\x01\x04\x06\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := uniquePrefix(t)
			base := limitBase(keyName(prefix+"k"), tc.limit.StateID())
			var b meta.Batch
			b.Set(tc.key(base), []byte(tc.value), time.Minute)
			if err := raw.Do(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
			for _, op := range []sluice.Op{sluice.OpTake, sluice.OpPeek} {
				r := sluice.Request{Prefix: prefix, Key: "k", Limits: []sluice.Limit{tc.limit}, Op: op, Cost: 1, Now: t0}
				if _, err := s.Decide(context.Background(), r); !errors.Is(err, sluice.ErrCorruptState) {
					t.Errorf("%v on %q = %v, want ErrCorruptState", op, tc.value, err)
				}
			}
		})
	}
}

// TestBadServer points the store at servers that answer garbage or
// nothing: errors wrapping sluice.ErrStore, within the timeout.
func TestBadServer(t *testing.T) {
	for _, reply := range []string{"", "VALUE foo 0 3\r\nbar\r\nEND\r\n", "\x00\x01\x02\r\n"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					br := bufio.NewReader(c)
					br.ReadString('\n')
					c.Write([]byte(reply))
					c.SetReadDeadline(time.Now().Add(5 * time.Second))
					br.ReadString('\n')
				}()
			}
		}()
		s := newStore(t, Config{Addrs: []string{l.Addr().String()}, Timeout: 200 * time.Millisecond})
		r := sluice.Request{Key: "k", Limits: []sluice.Limit{sluice.PerSecond(1)}, Cost: 1}
		if _, err := s.Decide(context.Background(), r); !errors.Is(err, sluice.ErrStore) {
			t.Errorf("Decide against a server answering %q = %v, want ErrStore", reply, err)
		}
	}
}
