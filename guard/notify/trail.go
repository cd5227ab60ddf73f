package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of TrailConfig.
const (
	// DefaultTrailEntries bounds the entries of a Trail when its
	// MaxEntries is zero.
	DefaultTrailEntries = 10_000
	// DefaultTrailBytes bounds the memory of a Trail's entries when its
	// MaxBytes is zero.
	DefaultTrailBytes = 4 << 20
	// MaxPage bounds the entries one Page returns.
	MaxPage = 1000
)

// TrailConfig configures a Trail. The zero value of each field means its
// default.
type TrailConfig struct {
	// MaxEntries bounds the entries kept. Default DefaultTrailEntries.
	MaxEntries int
	// MaxBytes bounds the memory of the entries kept, about. Default
	// DefaultTrailBytes.
	MaxBytes int
	// Logger receives one line per event, at level Info, message "audit
	// ban", "audit lift" or "audit expire". Default none. Give it a
	// bounded handler (sluice serve's logs pass a few lines a second per
	// message and jail, and tell how many they left out): the Trail keeps
	// every event, the log need not.
	Logger *slog.Logger
}

// An Entry is an event of a Trail, numbered.
type Entry struct {
	// Seq numbers the entries of a Trail from 1, in the order added.
	Seq uint64 `json:"seq"`
	Event
}

// A Page is a part of a Trail, oldest first.
type Page struct {
	Entries []Entry `json:"entries"`
	// Next is the Seq to ask after for the entries that follow: the last
	// entry's, or the after asked when there is none.
	Next uint64 `json:"next"`
	// Evicted counts the entries the Trail has dropped, oldest first,
	// to stay within its bounds since it started.
	Evicted int64 `json:"evicted"`
}

// A Trail is the audit trail of bans: every event added is written as
// one log line, and kept in memory, in a ring bounded by count and by
// bytes that drops the oldest entries (counted) to make room. Adding
// never waits for a notification: a hung webhook holds up its own queue,
// never the trail.
//
// Create Trails with NewTrail; a Trail is safe for concurrent use.
type Trail struct {
	c       TrailConfig
	mu      sync.Mutex
	ring    []Entry // oldest first, from head
	head    int
	bytes   int
	seq     uint64
	evicted int64
}

// NewTrail returns an empty Trail.
func NewTrail(c TrailConfig) *Trail {
	c.MaxEntries = or(c.MaxEntries, DefaultTrailEntries)
	c.MaxBytes = or(c.MaxBytes, DefaultTrailBytes)
	return &Trail{c: c}
}

// Add writes e to the log and keeps it, and returns its Seq.
func (t *Trail) Add(e Event) uint64 {
	if t.c.Logger != nil {
		t.c.Logger.LogAttrs(context.Background(), slog.LevelInfo, "audit "+string(e.Kind),
			slog.String("jail", e.Jail), slog.String("key", e.Key), slog.String("reason", e.Reason),
			slog.Time("since", e.Since), slog.Time("until", e.Until), slog.Int("offences", e.Offences),
			slog.String("source", e.Source), slog.String("id", e.ID))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	t.ring = append(t.ring, Entry{Seq: t.seq, Event: e})
	t.bytes += e.size()
	for len(t.ring)-t.head > t.c.MaxEntries || t.bytes > t.c.MaxBytes && len(t.ring)-t.head > 1 {
		t.bytes -= t.ring[t.head].size()
		t.ring[t.head] = Entry{}
		t.head++
		t.evicted++
	}
	if t.head > len(t.ring)/2 && t.head > 64 { // reclaim the dropped half
		t.ring = append(t.ring[:0:0], t.ring[t.head:]...)
		t.head = 0
	}
	return t.seq
}

// Page returns, oldest first, at most limit (0 or beyond MaxPage:
// MaxPage) entries with Seq above after and Time not before since.
func (t *Trail) Page(after uint64, since time.Time, limit int) Page {
	if limit <= 0 || limit > MaxPage {
		limit = MaxPage
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := Page{Entries: []Entry{}, Next: after, Evicted: t.evicted}
	live := t.ring[t.head:]
	i := 0
	if len(live) > 0 && after >= live[0].Seq {
		i = int(min(after-live[0].Seq+1, uint64(len(live))))
	}
	for ; i < len(live) && len(p.Entries) < limit; i++ {
		if !live[i].Time.Before(since) {
			p.Entries = append(p.Entries, live[i])
		}
		p.Next = live[i].Seq
	}
	return p
}

// Len returns how many entries the Trail holds, and how many it evicted.
func (t *Trail) Len() (held int, evicted int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ring) - t.head, t.evicted
}
