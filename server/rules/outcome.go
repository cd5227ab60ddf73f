package rules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

// Outcome reporting: an application that learns only after the work
// whether it should count (a password was wrong) reserves a take and
// then commits or refunds it, or reports a failure after the fact. Each
// call carries the client's request id; a retried call with the same id
// is recognised, by a marker kept in the rule's own store (so every
// process sharing the store sees it), and counts once.
//
// A marker is a GCRA state of one unit per window on a key derived from
// the call: taking it succeeds once per window. Markers are SafeToForget:
// a memory store that must forget one treats its id as new (a retry
// after that may count twice) rather than charge it from a summary (a
// new report could be mistaken for a retry and lost).

// Limits of outcome calls.
const (
	// MaxOutcomeID is the longest request id, in bytes.
	MaxOutcomeID = 128
	// ReservationTTL is how long a reservation waits for its commit or
	// refund.
	ReservationTTL = time.Minute
	// ReportWindow is how long a report's id is remembered: a retry
	// within it counts once.
	ReportWindow = 24 * time.Hour
)

// Errors of outcome calls, besides those of Check. Each wraps
// sluice.ErrInvalidRequest.
var (
	// ErrNoReservation is the error of a commit or refund whose
	// reservation is unknown, or expired: an expired reservation's take
	// stays counted, as if committed.
	ErrNoReservation = fmt.Errorf("%w: no such reservation (unknown, or expired: an expired reservation stays counted)", sluice.ErrInvalidRequest)
	// ErrUnknownOutcome is the error of a report of an outcome other than
	// failure or success.
	ErrUnknownOutcome = fmt.Errorf("%w: unknown outcome", sluice.ErrInvalidRequest)
)

// An OutcomeRequest names one reservation or report: a named rule, the
// actor's key, the cost, and the client's request id.
type OutcomeRequest struct {
	Rule, Key string
	// Cost is the number of units; 0 means 1.
	Cost int
	// ID is the client's request id: 1 to MaxOutcomeID bytes, unique per
	// reservation or report.
	ID string
}

// An OutcomeResult is the answer to an outcome call.
type OutcomeResult struct {
	// Status is the rule's status after the call: for Reserve, that of
	// the take; for a refund or a report, what a peek of 1 gets after.
	Status Status
	// Duplicate reports that the id was seen before: nothing was counted
	// again (for Reserve, Status is then a peek).
	Duplicate bool
	// Expires is when a reservation that was allowed stops waiting for
	// its commit or refund.
	Expires time.Time
}

// outcomeRule checks o, defaults its cost, and returns its rule.
func (e *Engine) outcomeRule(o *OutcomeRequest) (*Rule, error) {
	switch {
	case !e.IsNamed(o.Rule):
		return nil, fmt.Errorf("%w %q (outcomes are reported on named rules)", ErrUnknownDomain, o.Rule)
	case o.Key == "":
		return nil, fmt.Errorf("rules: %w: key is required", sluice.ErrInvalidRequest)
	case o.ID == "" || len(o.ID) > MaxOutcomeID:
		return nil, fmt.Errorf("rules: %w: id of %d bytes: give 1 to %d", sluice.ErrInvalidRequest, len(o.ID), MaxOutcomeID)
	case o.Cost < 0:
		return nil, fmt.Errorf("rules: %w: cost %d must be at least 1 (0 means 1)", sluice.ErrInvalidRequest, o.Cost)
	}
	o.Cost = max(o.Cost, 1)
	ru := e.domain(o.Rule).named
	if o.Cost > ru.maxCost {
		return nil, fmt.Errorf("rules: %w: cost %d, rule %s allows at most %d at once", sluice.ErrCostExceedsBurst, o.Cost, ru.ID, ru.maxCost)
	}
	return ru, nil
}

// marker returns the request that takes, peeks at or resets the marker
// of kind for o under ru, remembered for window.
func (e *Engine) marker(ru *Rule, kind string, o *OutcomeRequest, op sluice.Op, window time.Duration) sluice.Request {
	h := sha256.New()
	for _, f := range []string{kind, o.Key, strconv.Itoa(o.Cost), o.ID} {
		h.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
	}
	// The window is part of the limit, so that markers of different
	// windows never share a state.
	return sluice.Request{
		Prefix: e.ns + ":~outcome:" + ru.Name + ":", Key: hex.EncodeToString(h.Sum(nil)[:16]),
		Limits: []sluice.Limit{{Rate: 1, Period: window}}, Op: op, Cost: 1, Now: e.now(), SafeToForget: true,
	}
}

// once takes the marker of kind for o: it reports false when the id was
// seen within window.
func (e *Engine) once(ctx context.Context, ru *Rule, kind string, o *OutcomeRequest, window time.Duration) (bool, error) {
	d, err := ru.store.Decide(ctx, e.marker(ru, kind, o, sluice.OpTake, window))
	if err != nil {
		return false, storeError(ru, err)
	}
	return d.Allowed, nil
}

// Reserve takes o.Cost on o.Rule for o.Key, as Check does, and holds it
// for ReservationTTL awaiting Commit or Refund with the same request. A reserve
// retried with the same id takes nothing and reports Duplicate. A
// reservation that is neither committed nor refunded in time stays
// counted: a client that crashed or hung does not give its attempt back.
func (e *Engine) Reserve(ctx context.Context, o OutcomeRequest) (OutcomeResult, error) {
	ru, err := e.outcomeRule(&o)
	if err != nil {
		return OutcomeResult{}, err
	}
	first, err := e.once(ctx, ru, "reserve", &o, ReservationTTL)
	if err != nil {
		return OutcomeResult{}, err
	}
	op := sluice.OpTake
	if !first {
		op = sluice.OpPeek
	}
	res, err := e.Check(ctx, Request{Domain: o.Rule, Descriptors: []Descriptor{Key(o.Key)}, Cost: o.Cost, Op: op})
	if err != nil {
		return OutcomeResult{}, err
	}
	out := OutcomeResult{Status: res.Statuses[0], Duplicate: !first}
	switch {
	case !first:
	case res.Statuses[0].Decision.Allowed && res.Statuses[0].Guard == guard.Pass:
		out.Expires = res.Statuses[0].Decision.Time.Add(ReservationTTL)
	default: // nothing was taken: no reservation, and a retry may try again
		if _, err := ru.store.Decide(context.WithoutCancel(ctx), e.marker(ru, "reserve", &o, sluice.OpReset, ReservationTTL)); err != nil {
			e.log.WarnContext(ctx, "a denied reservation's id stays marked", "rule", ru.ID, "err", err)
		}
	}
	return out, nil
}

// Commit commits the reservation o names, once: a retry reports
// Duplicate and changes nothing. What was taken stays counted. The error
// wraps ErrNoReservation when the reservation is unknown or expired.
func (e *Engine) Commit(ctx context.Context, o OutcomeRequest) (OutcomeResult, error) {
	return e.settle(ctx, o, sluice.OpPeek)
}

// Refund refunds the reservation o names, once, as Commit commits it: it
// gives o.Cost back as a reward (the oldest units still counted, never
// more than were spent).
func (e *Engine) Refund(ctx context.Context, o OutcomeRequest) (OutcomeResult, error) {
	return e.settle(ctx, o, sluice.OpInsert)
}

// settle ends the reservation o names, once: with op OpPeek (commit:
// nothing changes) or OpInsert (refund: o.Cost given back).
func (e *Engine) settle(ctx context.Context, o OutcomeRequest, op sluice.Op) (OutcomeResult, error) {
	ru, err := e.outcomeRule(&o)
	if err != nil {
		return OutcomeResult{}, err
	}
	// A reservation is alive while its marker is spent.
	d, err := ru.store.Decide(ctx, e.marker(ru, "reserve", &o, sluice.OpPeek, ReservationTTL))
	if err != nil {
		return OutcomeResult{}, storeError(ru, err)
	}
	if d.Allowed {
		return OutcomeResult{}, ErrNoReservation
	}
	first, err := e.once(ctx, ru, "settle", &o, 2*ReservationTTL)
	if err != nil {
		return OutcomeResult{}, err
	}
	cost := 1
	if !first {
		op = sluice.OpPeek
	} else if op == sluice.OpInsert {
		cost = -o.Cost
	}
	res, err := e.Check(ctx, Request{Domain: o.Rule, Descriptors: []Descriptor{Key(o.Key)}, Cost: cost, Op: op})
	if err != nil {
		return OutcomeResult{}, err
	}
	return OutcomeResult{Status: res.Statuses[0], Duplicate: !first}, nil
}

// Report reports the outcome of work on o.Rule for o.Key that was not
// reserved, once per id within ReportWindow: "failure" counts o.Cost
// whether or not it fits (an insert) and tells the rule's jail, as a
// denial would; "success" counts nothing. The status says whether the
// actor may still act.
func (e *Engine) Report(ctx context.Context, o OutcomeRequest, outcome string) (OutcomeResult, error) {
	if outcome != "failure" && outcome != "success" {
		return OutcomeResult{}, fmt.Errorf("%w %q (want failure or success)", ErrUnknownOutcome, outcome)
	}
	ru, err := e.outcomeRule(&o)
	if err != nil {
		return OutcomeResult{}, err
	}
	first, err := e.once(ctx, ru, "report", &o, ReportWindow)
	if err != nil {
		return OutcomeResult{}, err
	}
	req := Request{Domain: o.Rule, Descriptors: []Descriptor{Key(o.Key)}, Op: sluice.OpPeek}
	failed := first && outcome == "failure"
	if failed {
		req.Op, req.Cost = sluice.OpInsert, o.Cost
	}
	res, err := e.Check(ctx, req)
	if err != nil {
		return OutcomeResult{}, err
	}
	st := res.Statuses[0]
	if failed && st.Guard == guard.Pass && e.guard != nil && e.guard.Counts(ru.Name) {
		a, _ := req.Descriptors[0].actor(netip.Addr{})
		if _, err := e.guard.Strike(ctx, ru.Name, a, st.Decision); err != nil {
			e.log.WarnContext(ctx, "jail not told of a failure", "rule", ru.Name, "err", err)
		}
	}
	return OutcomeResult{Status: st, Duplicate: !first}, nil
}
