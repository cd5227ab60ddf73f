package redis

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// take decides one request and fails the test on error.
func take(t *testing.T, s sluice.Store, r sluice.Request) sluice.Decision {
	t.Helper()
	d, err := s.Decide(context.Background(), r)
	if err != nil {
		t.Fatalf("Decide(%v %q) = %v", r.Op, r.Key, err)
	}
	return d
}

// commandCalls returns the calls of each command since the server
// started, from INFO commandstats.
func commandCalls(t *testing.T) map[string]int {
	t.Helper()
	info, err := sharedServer(t).Info("commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	calls := map[string]int{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		f, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		calls[name], _ = strconv.Atoi(f)
	}
	return calls
}

// TestOneRoundTrip counts, with INFO commandstats, the commands a client
// sends: one EVALSHA per decision, whatever the number of limits and the
// operation, and no other command from the client.
func TestOneRoundTrip(t *testing.T) {
	policy := []sluice.Limit{
		{Rate: 10, Period: time.Second},
		{Rate: 100, Period: time.Minute, Algorithm: sluice.FixedWindow, Staggered: true},
		{Rate: 1000, Period: time.Hour, Algorithm: sluice.SlidingWindow, Buckets: 60},
		{Rate: 50, Period: time.Minute, Algorithm: sluice.ApproxSlidingWindow},
		{Rate: 20, Period: time.Minute, Algorithm: sluice.SlidingLog},
	}
	for _, tc := range bothClients {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.c(t))
			prefix := uniquePrefix(t)
			take(t, s, sluice.Request{Prefix: prefix, Key: "warm", Limits: policy[:1], Cost: 1}) // loads the script
			const n = 50
			before := commandCalls(t)
			for i := range n {
				op := []sluice.Op{sluice.OpTake, sluice.OpPeek, sluice.OpTake, sluice.OpReset}[i%4]
				r := sluice.Request{Prefix: prefix, Key: "actor", Limits: policy[:1+i%len(policy)], Op: op, Cost: 1}
				take(t, s, r)
			}
			after := commandCalls(t)
			if got := after["evalsha"] - before["evalsha"]; got != n {
				t.Errorf("EVALSHA calls for %d decisions = %d, want %d", n, got, n)
			}
			// Commands a script runs are counted too; none of these is sent
			// by the client, and INFO is the test's own. Connection setup
			// and the client's idle keepalive are not per decision.
			inScript := map[string]bool{"evalsha": true, "info": true, "get": true, "set": true, "del": true,
				"time": true, "getrange": true, "setrange": true, "strlen": true, "pexpire": true,
				"ping": true, "hello": true, "select": true, "auth": true}
			for cmd, calls := range after {
				if d := calls - before[cmd]; d != 0 && !inScript[cmd] && !strings.HasPrefix(cmd, "client|") {
					t.Errorf("client sent %d %s commands besides EVALSHA", d, cmd)
				}
			}
		})
	}
}

// TestServerClock checks that a request without Now is timed by the
// Redis server's clock, in whole microseconds.
func TestServerClock(t *testing.T) {
	s := newStore(t, Config{})
	before := time.Now()
	d := take(t, s, sluice.Request{Prefix: uniquePrefix(t), Key: "a", Limits: []sluice.Limit{sluice.PerSecond(5)}, Cost: 1})
	if d.Time.Before(before.Add(-time.Minute)) || d.Time.After(time.Now().Add(time.Minute)) {
		t.Errorf("Decision.Time = %v, want the server's time near %v", d.Time, before)
	}
	if d.Time.Nanosecond()%1000 != 0 {
		t.Errorf("Decision.Time = %v, want whole microseconds", d.Time)
	}
}

// TestExpiry checks that every key written expires when its state is
// back to empty, plus TTLSlack, and that a peek writes nothing.
func TestExpiry(t *testing.T) {
	s := newStore(t, Config{TTLSlack: 500 * time.Millisecond})
	prefix := uniquePrefix(t)
	policy := []sluice.Limit{
		{Rate: 10, Period: 10 * time.Second},                                // GCRA: one take refills in 1 s
		{Rate: 5, Period: time.Minute, Algorithm: sluice.SlidingWindow},     // newest bucket leaves in ≤ 66 s
		{Rate: 10, Period: 30 * time.Second, Algorithm: sluice.SlidingLog},  // the take leaves in 30 s
		{Rate: 10, Period: 20 * time.Second, Algorithm: sluice.FixedWindow}, // window ends in ≤ 20 s
	}
	if d := take(t, s, sluice.Request{Prefix: prefix, Key: "p", Limits: policy, Op: sluice.OpPeek, Cost: 1}); !d.Allowed {
		t.Fatalf("peek = %+v, want allowed", d)
	}
	for _, l := range policy {
		if got, _ := sharedServer(t).Do("EXISTS", Key(prefix, "p", l)); got != "0" {
			t.Errorf("after a peek, EXISTS %s = %s, want 0", l, got)
		}
	}
	now := t0.Add(7 * time.Second)
	d := take(t, s, sluice.Request{Prefix: prefix, Key: "p", Limits: policy, Cost: 1, Now: now})
	if !d.Allowed {
		t.Fatalf("take = %+v, want allowed", d)
	}
	for _, l := range policy {
		want := algorithm.Take(l, make([]int64, algorithm.Words(l)), now.UnixNano(), 1).ResetAfter + 500*time.Millisecond
		got, err := sharedServer(t).Do("PTTL", Key(prefix, "p", l))
		ms, _ := strconv.Atoi(got)
		if err != nil || time.Duration(ms)*time.Millisecond > want || time.Duration(ms)*time.Millisecond < want-5*time.Second {
			t.Errorf("%s: PTTL = %s (%v), want about %v", l, got, err, want)
		}
	}
}

// TestBadInput checks keys of any bytes and values the script did not
// write: clear errors, nothing written, never a panic or an allow.
func TestBadInput(t *testing.T) {
	s := newStore(t, Config{})
	srv := sharedServer(t)
	prefix := uniquePrefix(t)
	ctx := context.Background()
	gcra := []sluice.Limit{{Rate: 2, Period: time.Second}}

	t.Run("keys", func(t *testing.T) {
		big := strings.Repeat("{}\x00", 1<<20)
		for _, key := range []string{"", "{", "}", "}{", "{a}", "\x00", "a\x00b", "é\xff", big, big + "x"} {
			for i := range 3 {
				d := take(t, s, sluice.Request{Prefix: prefix, Key: key, Limits: gcra, Cost: 1, Now: t0})
				if want := i < 2; d.Allowed != want {
					t.Errorf("take %d of key %.20q: Allowed = %v, want %v", i, key, d.Allowed, want)
				}
			}
		}
		// Distinct names stay distinct: "a"+"bc" is "ab"+"c" by contract, but
		// not "a"+"b".
		if Key("a", "bc", gcra[0]) != Key("ab", "c", gcra[0]) || Key("a", "b", gcra[0]) == Key("a", "bc", gcra[0]) {
			t.Errorf("Key does not name Prefix+Key")
		}
		if k := Key("", big, gcra[0]); len(k) > 100 || strings.Count(k, "{") != 1 || strings.Index(k, "}") != 9 {
			t.Errorf("Key of a 3 MB name = %q, want short, tag first", k)
		}
	})

	all := []sluice.Limit{
		{Rate: 2, Period: time.Second},
		{Rate: 2, Period: time.Second, Algorithm: sluice.FixedWindow},
		{Rate: 2, Period: time.Second, Algorithm: sluice.SlidingWindow},
		{Rate: 2, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow},
		{Rate: 2, Period: time.Second, Algorithm: sluice.SlidingLog},
		{Rate: 1000, Period: time.Second, Algorithm: sluice.SlidingLog},
	}
	nan := "\x00\x00\x00\x00\x00\x00\xf8\x7f"
	for _, l := range all {
		for _, tc := range []struct {
			name  string
			setup []string // a command that overwrites the key
			want  error
		}{
			{"list", []string{"RPUSH", "", "x"}, sluice.ErrStore},
			{"hash", []string{"HSET", "", "f", "v"}, sluice.ErrStore},
			{"text", []string{"SET", "", "hello"}, sluice.ErrCorruptState},
			{"nan", []string{"SET", "", strings.Repeat(nan, algorithm.Words(l))}, sluice.ErrCorruptState},
			{"negative", []string{"SET", "", strings.Repeat("\x00\x00\x00\x00\x00\x00\xf0\xbf", algorithm.Words(l))}, sluice.ErrCorruptState},
		} {
			t.Run(l.String()+"/"+tc.name, func(t *testing.T) {
				key := tc.name + l.String()
				ok := sluice.Limit{Rate: 5, Period: time.Hour}
				policy := []sluice.Limit{ok, l}
				tc.setup[1] = Key(prefix, key, l)
				if _, err := srv.Do(tc.setup...); err != nil {
					t.Fatalf("%v: %v", tc.setup, err)
				}
				for _, op := range []sluice.Op{sluice.OpTake, sluice.OpPeek, sluice.OpRefund} {
					r := sluice.Request{Prefix: prefix, Key: key, Limits: policy, Op: op, Cost: 1, Now: t0, At: t0}
					d, err := s.Decide(ctx, r)
					if !errors.Is(err, tc.want) || d.Allowed {
						t.Errorf("%v over a %s: Decide = %+v, %v; want an error wrapping %v", op, tc.name, d, err, tc.want)
					}
				}
				// All-or-nothing: the good limit's key was not written.
				if got, _ := srv.Do("EXISTS", Key(prefix, key, ok)); got != "0" {
					t.Errorf("after a failed take, the other limit's key exists")
				}
				// Reset clears it.
				if _, err := s.Decide(ctx, sluice.Request{Prefix: prefix, Key: key, Limits: policy, Op: sluice.OpReset}); err != nil {
					t.Errorf("reset = %v", err)
				}
				if d := take(t, s, sluice.Request{Prefix: prefix, Key: key, Limits: policy, Cost: 1, Now: t0}); !d.Allowed {
					t.Errorf("take after reset = %+v, want allowed", d)
				}
			})
		}
	}

	t.Run("invalid", func(t *testing.T) {
		for _, r := range []sluice.Request{
			{Key: "x", Cost: 1},
			{Key: "x", Limits: gcra, Cost: 0},
			{Key: "x", Limits: gcra, Cost: 3},
			{Key: "x", Limits: []sluice.Limit{{Rate: 1 << 60, Period: 1 << 61}}, Cost: 1},
		} {
			if d, err := s.Decide(ctx, r); err == nil || errors.Is(err, sluice.ErrStore) || d.Allowed {
				t.Errorf("Decide(%+v) = %+v, %v; want an invalid-request error", r, d, err)
			}
		}
	})
}

// TestTextArguments checks that the script decides a request given as
// text, as tools such as redis-benchmark send it, exactly as the packed
// request the Store sends, alone or in a batch; and that a malformed
// packed request is an error reply.
func TestTextArguments(t *testing.T) {
	s := newStore(t, Config{})
	srv := sharedServer(t)
	prefix := uniquePrefix(t)
	policies := [][]sluice.Limit{
		{{Rate: 3, Period: time.Second}},
		{{Rate: 3, Period: time.Second, Algorithm: sluice.FixedWindow, Staggered: true}},
		{
			{Rate: 3, Period: time.Second},
			{Rate: 5, Period: time.Minute, Algorithm: sluice.SlidingWindow, Buckets: 6},
			{Rate: 4, Period: time.Minute, Algorithm: sluice.ApproxSlidingWindow},
			{Rate: 4, Period: time.Minute, Algorithm: sluice.SlidingLog},
		},
		nil, // 150 limits: more numbers than the script unpacks at once
	}
	for i := range 150 {
		l := sluice.Limit{Rate: 3 + i, Period: time.Duration(1+i) * time.Second}
		if i%2 == 1 {
			l.Algorithm = sluice.FixedWindow
		}
		policies[3] = append(policies[3], l)
	}
	// eval runs r through EVAL, with its arguments as the Store sends
	// them ("p" and the packed request), as text, or in a batch of one.
	eval := func(r sluice.Request, form string) (string, error) {
		keys, args := s.encode(&r)
		switch form {
		case "text":
			packed := args[1]
			args = nil
			for len(packed) > 0 {
				v := math.Float64frombits(binary.LittleEndian.Uint64([]byte(packed[:8])))
				args = append(args, strconv.FormatInt(int64(v), 10))
				packed = packed[8:]
			}
		case "batch":
			args = []string{"b", args[1]}
		}
		cmd := append([]string{"EVAL", Script(), strconv.Itoa(len(keys))}, keys...)
		return srv.Do(append(cmd, args...)...)
	}
	ops := []sluice.Op{sluice.OpTake, sluice.OpTake, sluice.OpPeek, sluice.OpTake, sluice.OpRefund, sluice.OpTake, sluice.OpTake, sluice.OpReset}
	for pi, policy := range policies {
		// Each form decides the same requests, on the same keys (a
		// staggered window's offset depends on the name), from empty.
		var want []string
		for _, form := range []string{"packed", "text", "batch"} {
			for _, l := range policy {
				if _, err := srv.Do("DEL", Key(prefix, "k", l)); err != nil {
					t.Fatal(err)
				}
			}
			for i, op := range ops {
				r := sluice.Request{Prefix: prefix, Key: "k", Limits: policy, Op: op, Cost: 1 + i%2,
					Now: t0.Add(time.Duration(i) * 100 * time.Millisecond), At: t0}
				got, err := eval(r, form)
				if err != nil {
					t.Fatalf("policy %d, step %d (%v) as %s: %v", pi, i, op, form, err)
				}
				if form == "packed" {
					want = append(want, got)
				} else if got != want[i] {
					t.Errorf("policy %d, step %d (%v) as %s:\n got  %x\n want %x", pi, i, op, form, got, want[i])
				}
			}
		}
	}
	for _, args := range [][]string{
		{"p", "short"},
		{"p", ""},
		{"p", strings.Repeat("\x00", 8*13)}, // 13 numbers: not 5 + 7n
		{"b", strings.Repeat("\x00", 8*11)},
	} {
		if reply, err := srv.Do("EVAL", Script(), "1", "k", args[0], args[1]); err == nil || !strings.Contains(err.Error(), "packed request") {
			t.Errorf("EVAL of a %d-byte packed request = %q, %v; want an error about it", len(args[1]), reply, err)
		}
	}
}

// TestScriptFlushed checks that a SCRIPT FLUSH mid-run (or a restarted
// server) costs one EVAL and no error, for Decide and DecideBatch.
func TestScriptFlushed(t *testing.T) {
	srv := sharedServer(t)
	for _, tc := range bothClients {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.c(t))
			prefix := uniquePrefix(t)
			r := sluice.Request{Prefix: prefix, Key: "a", Limits: []sluice.Limit{{Rate: 100, Period: time.Hour}}, Cost: 1, Now: t0}
			remaining := 99
			for i := range 6 {
				if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
					t.Fatal(err)
				}
				if i%2 == 0 {
					d := take(t, s, r)
					if !d.Allowed || d.Remaining != remaining {
						t.Fatalf("take %d after SCRIPT FLUSH = %+v, want allowed with %d remaining", i, d, remaining)
					}
					remaining--
					continue
				}
				ds, errs := s.DecideBatch(context.Background(), []sluice.Request{r, r})
				for j := range ds {
					if errs[j] != nil || !ds[j].Allowed || ds[j].Remaining != remaining {
						t.Fatalf("batch %d[%d] after SCRIPT FLUSH = %+v, %v; want allowed with %d remaining", i, j, ds[j], errs[j], remaining)
					}
					remaining--
				}
			}
		})
	}
}

// TestDecideBatch checks a batch of requests for many keys, with invalid
// ones among them, against Decide's answers.
func TestDecideBatch(t *testing.T) {
	s := newStore(t, Config{})
	prefix := uniquePrefix(t)
	policy := []sluice.Limit{{Rate: 3, Period: time.Hour}, {Rate: 5, Period: time.Hour, Algorithm: sluice.SlidingLog}}
	var rs []sluice.Request
	for i := range 200 {
		rs = append(rs, sluice.Request{Prefix: prefix, Key: strconv.Itoa(i % 50), Limits: policy, Cost: 1, Now: t0})
	}
	rs = append(rs, sluice.Request{Prefix: prefix, Key: "bad", Limits: policy, Cost: 9})
	ds, errs := s.DecideBatch(context.Background(), rs)
	allowed := map[string]int{}
	for i, d := range ds[:200] {
		if errs[i] != nil {
			t.Fatalf("DecideBatch[%d] error %v", i, errs[i])
		}
		if d.Allowed {
			allowed[rs[i].Key]++
		}
	}
	for k, n := range allowed {
		if n != 3 {
			t.Errorf("key %s: %d allowed of 4, want 3", k, n)
		}
	}
	if len(allowed) != 50 {
		t.Errorf("%d keys allowed, want 50", len(allowed))
	}
	if !errors.Is(errs[200], sluice.ErrCostExceedsBurst) {
		t.Errorf("DecideBatch of cost 9 = %v, want ErrCostExceedsBurst", errs[200])
	}
}

// TestBigLog checks a sliding log over 512 words, which the script reads
// by GETRANGE: filled exactly, denied with the right RetryAfter, refunded,
// resized when its rate changes.
func TestBigLog(t *testing.T) {
	s := newStore(t, Config{})
	prefix := uniquePrefix(t)
	l := sluice.Limit{Rate: 2000, Period: time.Minute, Algorithm: sluice.SlidingLog}
	st := make([]int64, algorithm.Words(l))
	now := t0
	check := func(r sluice.Request) {
		t.Helper()
		got := take(t, s, r)
		if want := reference(r.Limits, [][]int64{st}, prefix+"k", r); got != want {
			t.Fatalf("%v of %d at +%v:\n got  %+v\n want %+v", r.Op, r.Cost, r.Now.Sub(t0), got, want)
		}
	}
	for i := range 60 {
		now = now.Add(time.Duration(i%7) * 100 * time.Millisecond)
		check(sluice.Request{Prefix: prefix, Key: "k", Limits: []sluice.Limit{l}, Cost: 1 + i%80, Now: now})
		if i%9 == 0 {
			check(sluice.Request{Prefix: prefix, Key: "k", Limits: []sluice.Limit{l}, Op: sluice.OpRefund, Cost: 3, Now: now, At: now})
		}
	}
	for range 5 { // deny at the limit
		check(sluice.Request{Prefix: prefix, Key: "k", Limits: []sluice.Limit{l}, Cost: 700, Now: now})
	}
	// The rate changes: same StateID, the log is fitted to it.
	l2 := l
	l2.Rate = 1500
	st = algorithm.Fit(l2, st)
	check(sluice.Request{Prefix: prefix, Key: "k", Limits: []sluice.Limit{l2}, Cost: 1, Now: now})
	check(sluice.Request{Prefix: prefix, Key: "k", Limits: []sluice.Limit{l2}, Cost: 1, Now: now.Add(59 * time.Second)})
}

// bothClients are the clients a test runs the store on: rueidis, as New
// dials it, and go-redis, both on the shared server.
var bothClients = []struct {
	name string
	c    func(t *testing.T) Config
}{
	{"rueidis", func(t *testing.T) Config { return Config{} }},
	{"go-redis", func(t *testing.T) Config {
		c := goredis.NewClient(&goredis.Options{Addr: sharedServer(t).Addr})
		t.Cleanup(func() { c.Close() })
		return Config{GoRedis: c}
	}},
}

// TestUnpack checks the reading of the script's reply: eight integers
// come back exact, and any other reply (a script of another version
// answering under the name, a cut reply) is an error, never a decision.
func TestUnpack(t *testing.T) {
	word := func(f float64) string {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(f))
		return string(b[:])
	}
	good := words{1, 2, 3, 4, 5, 1795000000000000, 999, 0}
	var s string
	for _, v := range good {
		s += word(float64(v))
	}
	if got, err := unpack(s, nil); err != nil || got != good {
		t.Errorf("unpack(good) = %v, %v; want %v", got, err, good)
	}
	for name, bad := range map[string]string{
		"empty":    "",
		"short":    s[:63],
		"long":     s + "x",
		"fraction": word(0.5) + s[8:],
		"nan":      s[:8] + word(math.NaN()) + s[16:],
		"inf":      s[:56] + word(math.Inf(-1)),
		"huge":     word(1e300) + s[8:],
	} {
		if got, err := unpack(bad, nil); !errors.Is(err, errReply) {
			t.Errorf("unpack(%s) = %v, %v; want errReply", name, got, err)
		}
	}
	failed := errors.New("ERR")
	if _, err := unpack(s, failed); err != failed {
		t.Errorf("unpack with an error = %v, want it passed on", err)
	}
}
