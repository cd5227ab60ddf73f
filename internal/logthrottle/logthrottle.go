// Package logthrottle bounds what a flood of requests can write to the
// logs: a slog.Handler that passes at most a burst of lines, then a few
// per interval, for each message and rule, and tells on the next line it
// passes how many it left out.
package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Defaults of Config.
const (
	// DefaultBurst is how many lines of one message and rule pass at once.
	DefaultBurst = 10
	// DefaultEvery is how often one more line of a message and rule may
	// pass once its burst is spent.
	DefaultEvery = time.Second
	// DefaultMaxKeys bounds the messages and rules tracked one by one.
	DefaultMaxKeys = 4096
)

// SuppressedKey is the attribute that counts the lines of the same
// message and rule left out before the line that carries it.
const SuppressedKey = "suppressed"

// Config configures a Handler. The zero value of each field means its
// default.
type Config struct {
	// Burst is how many lines of one message and rule pass at once.
	// Default DefaultBurst.
	Burst int
	// Every is how often one more line may pass once the burst is spent.
	// Default DefaultEvery.
	Every time.Duration
	// MaxKeys bounds the messages and rules tracked one by one; lines of
	// any others share one allowance. Default DefaultMaxKeys.
	MaxKeys int
	// RuleKeys are the attributes that tell rules apart: a line's key is
	// its message and the values of these. Default "rule", "jail".
	RuleKeys []string
	// Clock returns the time of lines. Default time.Now.
	Clock func() time.Time
}

// A Handler passes the lines of next at a bounded rate per message and
// rule: under a flood of denials, failures or bans, the log grows by at
// most Burst lines plus one per Every for each message and rule (and
// MaxKeys bounds the number of those), whatever the number of requests.
// A line that passes after some were left out carries their count as
// SuppressedKey. Metrics, not logs, count every event.
//
// Create Handlers with New; they are safe for concurrent use, and the
// Handlers WithAttrs and WithGroup return share their allowances.
type Handler struct {
	next  slog.Handler
	st    *state
	attrs []slog.Attr // of WithAttrs, for the rule keys
}

type state struct {
	mu    sync.Mutex
	limit sluice.Limit
	max   int
	rules []string
	clock func() time.Time
	keys  map[string]*entry
	other entry // lines of keys beyond max
	swept int64 // when keys was last swept, Unix ns
}

type entry struct {
	tat        int64 // GCRA state of the key's allowance
	suppressed int64
}

// New returns a Handler that passes the lines of next as c allows.
func New(next slog.Handler, c Config) *Handler {
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.Every <= 0 {
		c.Every = DefaultEvery
	}
	if c.MaxKeys <= 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	if c.RuleKeys == nil {
		c.RuleKeys = []string{"rule", "jail"}
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	st := &state{
		limit: sluice.Limit{Rate: 1, Period: c.Every, Burst: c.Burst},
		max:   c.MaxKeys, rules: c.RuleKeys, clock: c.Clock,
		keys: map[string]*entry{},
	}
	return &Handler{next: next, st: st}
}

// Enabled reports whether next handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes r to next if its message and rule have allowance left.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	n, ok := h.st.take(h.key(r))
	if !ok {
		return nil
	}
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64(SuppressedKey, n))
	}
	return h.next.Handle(ctx, r)
}

// key is r's message and the values of its rule attributes.
func (h *Handler) key(r slog.Record) string {
	key := r.Message
	add := func(a slog.Attr) bool {
		for _, k := range h.st.rules {
			if a.Key == k {
				key += "\x00" + a.Value.String()
			}
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	return key
}

// take spends one line of key's allowance, and returns how many lines of
// key were left out since the last that passed.
func (st *state) take(key string) (int64, bool) {
	now := st.clock().UnixNano()
	st.mu.Lock()
	defer st.mu.Unlock()
	e := st.keys[key]
	if e == nil {
		if len(st.keys) >= st.max && now-st.swept >= int64(st.limit.Period) {
			st.sweep(now)
		}
		e = &st.other
		if len(st.keys) < st.max {
			e = &entry{}
			st.keys[key] = e
		}
	}
	var d sluice.Decision
	next := algorithm.GCRA(&st.limit, e.tat, now, 1, &d)
	if !d.Allowed {
		e.suppressed++
		return 0, false
	}
	e.tat = next
	n := e.suppressed
	e.suppressed = 0
	return n, true
}

// sweep forgets the keys back to their full allowance with nothing left
// out to tell, at most once per period, so that new messages get keys of
// their own again. It requires st.mu.
func (st *state) sweep(now int64) {
	st.swept = now
	for k, e := range st.keys {
		if e.tat <= now && e.suppressed == 0 {
			delete(st.keys, k)
		}
	}
}

// WithAttrs returns a Handler whose lines carry attrs, sharing h's
// allowances.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), st: h.st, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], attrs...)}
}

// WithGroup returns a Handler whose lines' attributes go in group name,
// sharing h's allowances.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), st: h.st, attrs: h.attrs}
}
