package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/wire"
)

// A Snapshot is what the dashboard shows of the moment: the decisions
// of every rule by cause (per second, and since the service started),
// each rule's most refused keys and their state, and how many bans are
// in force. The service computes one a second while a dashboard is open,
// and a Feed sends it to all of them; GET /admin/api/live answers one
// with the rates of the last minutes.
type Snapshot struct {
	Time time.Time `json:"time"`
	// Times are the Unix seconds of the samples of every rule's series,
	// oldest first: in the events of a Feed, the latest sample alone;
	// from GET /admin/api/live, the last minutes.
	Times []int64    `json:"times"`
	Rules []RuleLive `json:"rules"`
	// BansTotal is how many bans the registry holds; BansChanges counts
	// the bans it made and dropped, so that a dashboard whose page of
	// bans is older fetches it again (GET /admin/api/bans/page).
	BansTotal   int   `json:"bans_total"`
	BansChanges int64 `json:"bans_changes"`
	// Jails are the jails that lost strikes since the service started,
	// by name.
	Jails []JailLive `json:"jails,omitempty"`
	// Trimmed tells that the snapshot was too large for one event
	// (MaxEvent) and lost some top keys, or whole rules (RulesLeftOut of
	// them, the last ones).
	Trimmed      bool `json:"trimmed,omitempty"`
	RulesLeftOut int  `json:"rules_left_out,omitempty"`
	// Quota holds the edge quotas' buckets this replica has seen (the
	// RLQS streams it serves, the reports it was sent), by name.
	Quota []wire.QuotaStats `json:"quota,omitempty"`
}

// A JailLive is a jail of a Snapshot: the failures it was told of and
// did not count, or counted without those before, by reason
// ("estimated", "forgotten", "store-error"; see guard.StrikeLoss), as
// sluice_jail_strikes_lost_total counts them.
type JailLive struct {
	Name        string            `json:"name"`
	StrikesLost map[string]uint64 `json:"strikes_lost"`
}

// A RuleLive is a rule of a Snapshot.
type RuleLive struct {
	Name string `json:"name"`
	// Mode is "enforce", or "shadow" for a rule that decides and counts
	// but never denies (a dry run): its denials are what it would have
	// denied. The guard's refusals are never shadowed.
	Mode string `json:"mode"`
	// Health is the state of the rule's store: "ok", "errors" (some
	// decisions failed in the last second) or "failing" (a circuit
	// breaker is open: the failure policy answers).
	Health string `json:"health"`
	// The series of the rule's takes per second, one value per Time, by
	// cause: allowed (by its limits, or by the allow list); denied by
	// its limits; denied on an estimate (of a memory store at its cap,
	// which forgot the actor); refused by a ban; refused by the deny
	// list.
	Allowed   []float64 `json:"allowed"`
	Denied    []float64 `json:"denied"`
	Estimated []float64 `json:"estimated"`
	Banned    []float64 `json:"banned"`
	DenyList  []float64 `json:"deny_list"`
	// Totals are the same counts since the service started, as
	// sluice_decisions_total (takes) and sluice_guard_total count them.
	Totals Causes `json:"totals"`
	// Top are the keys the rule refused most, for any cause, over the
	// last TopWindow seconds, heaviest first.
	Top       []TopKey `json:"top"`
	TopWindow int      `json:"top_window"`
}

// Causes counts a rule's decisions by cause (see RuleLive).
type Causes struct {
	Allowed   uint64 `json:"allowed"`
	Denied    uint64 `json:"denied"`
	Estimated uint64 `json:"estimated"`
	Banned    uint64 `json:"banned"`
	DenyList  uint64 `json:"deny_list"`
}

// Refused returns the refusals of c: every cause but Allowed.
func (c Causes) Refused() uint64 { return c.Denied + c.Estimated + c.Banned + c.DenyList }

// A TopKey is one of the keys a rule refused most, and its state now.
type TopKey struct {
	// Key is the key as the rule's store counts it: a key longer than
	// sluice.MaxActorLen is its digest ("#…", Hashed), which no ban can
	// name.
	Key    string `json:"key"`
	Hashed bool   `json:"hashed,omitempty"`
	// Refusals is the estimated number of refusals in the window; at
	// least Refusals-Error of them happened.
	Refusals uint64 `json:"refusals"`
	Error    uint64 `json:"error"`
	// State is "banned" (Ban says by which ban), "deny-list", "denied"
	// (over the limit now), "allowed", "allow-list", or "unknown" (the
	// store did not answer, the rule is a domain's, or the key is
	// hashed).
	State      string    `json:"state"`
	RetryAfter float64   `json:"retry_after,omitempty"`
	Ban        *wire.Ban `json:"ban,omitempty"`
}

// MaxEvent bounds the size of an event of a Feed: a Snapshot larger
// once encoded is trimmed (Snapshot.Trimmed), so that a dashboard on a
// slow link keeps up whatever the keys, reasons and bans.
const MaxEvent = 64 << 10

// maxStreams bounds the dashboards streaming at once.
const maxStreams = 64

// A Feed sends Snapshots to the dashboards streaming them (server-sent
// events): each Snapshot is encoded once, whatever the number of
// dashboards, and a dashboard too slow to take one misses it for the
// next. The zero value is not usable; use NewFeed. A Feed is safe for
// concurrent use.
type Feed struct {
	mu     sync.Mutex
	subs   map[chan []byte]struct{}
	last   []byte // the latest event, for dashboards that open
	closed chan struct{}
	once   sync.Once
}

// NewFeed returns a Feed with no dashboards.
func NewFeed() *Feed {
	return &Feed{subs: map[chan []byte]struct{}{}, closed: make(chan struct{})}
}

// Watched reports whether a dashboard is streaming: a Snapshot need not
// be computed while none is.
func (f *Feed) Watched() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs) > 0
}

// Publish sends s to every dashboard streaming, trimmed to MaxEvent.
func (f *Feed) Publish(s *Snapshot) error {
	data, err := Encode(s, MaxEvent-eventOverhead)
	if err != nil {
		return err
	}
	ev := make([]byte, 0, len(data)+eventOverhead)
	ev = append(append(append(ev, "event: snapshot\ndata: "...), data...), "\n\n"...)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = ev
	for ch := range f.subs {
		select { // a full channel holds an older snapshot: replace it
		case <-ch:
		default:
		}
		ch <- ev
	}
	return nil
}

// eventOverhead is what an event adds to its snapshot.
const eventOverhead = len("event: snapshot\ndata: \n\n")

// Encode returns the JSON of s in at most limit bytes: when it is
// larger, it trims s (see fit) and says so in it.
func Encode(s *Snapshot, limit int) ([]byte, error) {
	data, err := json.Marshal(s)
	if err != nil || len(data) <= limit {
		return data, err
	}
	if err := s.fit(limit); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// fit trims s to encode in at most limit bytes: it keeps the rules, in
// order, with none of their top keys, while they fit, leaving out the
// rest; then the top keys, rank by rank (every rule's heaviest, then
// every rule's second, …), while they fit. Each part is encoded once.
func (s *Snapshot) fit(limit int) error {
	rules := s.Rules
	s.Rules, s.Trimmed, s.RulesLeftOut = nil, true, len(rules)
	base, err := json.Marshal(s)
	if err != nil {
		return err
	}
	left := limit - len(base) - 2 // "[]" in place of null, and more
	tops := make([][]TopKey, len(rules))
	for i := range rules {
		tops[i], rules[i].Top = rules[i].Top, nil
		bare, err := json.Marshal(rules[i])
		if err != nil {
			return err
		}
		if left -= len(bare) + 1; left < 0 {
			break
		}
		s.Rules = append(s.Rules, rules[i])
	}
	if len(s.Rules) == 0 {
		return fmt.Errorf("admin: no rule of the snapshot fits in %d bytes", limit)
	}
	s.RulesLeftOut = len(rules) - len(s.Rules)
	return s.fitTops(tops, max(left, 0))
}

// fitTops gives the rules of s their top keys of tops, rank by rank,
// while they fit in left bytes.
func (s *Snapshot) fitTops(tops [][]TopKey, left int) error {
	for rank := 0; ; rank++ {
		more := false
		for i := range s.Rules {
			if rank >= len(tops[i]) {
				continue
			}
			data, err := json.Marshal(tops[i][rank])
			if err != nil {
				return err
			}
			if left -= len(data) + 1; left < 0 {
				return nil
			}
			s.Rules[i].Top, more = append(s.Rules[i].Top, tops[i][rank]), true
		}
		if !more {
			return nil
		}
	}
}

// Close ends every stream and refuses new ones: call it when the server
// shuts down, which would otherwise wait for them.
func (f *Feed) Close() { f.once.Do(func() { close(f.closed) }) }

// subscribe registers a dashboard; false when there are maxStreams.
func (f *Feed) subscribe() (chan []byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= maxStreams {
		return nil, false
	}
	ch := make(chan []byte, 1)
	if f.last != nil {
		ch <- f.last
	}
	f.subs[ch] = struct{}{}
	return ch, true
}

func (f *Feed) unsubscribe(ch chan []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
}

// streamWrite bounds the write of one event to a dashboard.
const streamWrite = 10 * time.Second

// ServeHTTP streams the snapshots as server-sent events ("snapshot"),
// starting with the latest, until the dashboard leaves or the Feed
// closes.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-f.closed:
		writeError(w, http.StatusServiceUnavailable, "shutting down")
		return
	default:
	}
	ch, ok := f.subscribe()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "too many dashboards streaming")
		return
	}
	defer f.unsubscribe(ch)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ev := []byte("retry: 2000\n\n")
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWrite))
		if _, err := w.Write(ev); err != nil || rc.Flush() != nil {
			return
		}
		select {
		case ev = <-ch:
		case <-r.Context().Done():
			return
		case <-f.closed:
			return
		}
	}
}
