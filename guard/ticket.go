package guard

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// TicketTTL is how long a Ticket may be settled after its attempt began;
// a ticket is settled once within it.
const TicketTTL = time.Hour

// ErrInvalidTicket is the error of a ticket that is malformed or older
// than TicketTTL.
var ErrInvalidTicket = fmt.Errorf("%w: invalid login ticket", sluice.ErrInvalidRequest)

// A Ticket is what an allowed Attempt reserved, in a form that outlives
// its process: the times of its takes per address and username, per
// address, and (when it passed them) per username and for the site. A
// service that runs Begin in one call and learns the outcome in another,
// maybe in another process, hands its client the ticket with the attempt
// and takes it back with the outcome (see Login.Resume). An attempt that
// reserved nothing (the allow list let it through) has an empty ticket.
type Ticket struct {
	// Nonce tells apart the tickets of attempts whose takes the store
	// timed alike (its clock is coarse): each is settled once.
	Nonce uint64
	Times []time.Time
}

// Ticket returns the ticket of a, an allowed attempt.
func (a *Attempt) Ticket() Ticket {
	if a.ticket.Nonce == 0 {
		a.ticket.Nonce = rand.Uint64() | 1
		for _, r := range a.res {
			a.ticket.Times = append(a.ticket.Times, r.Time)
		}
	}
	return a.ticket
}

// String encodes t as its nonce and its times in Unix nanoseconds, in
// decimal, joined by '.'; ParseTicket reads it back.
func (t Ticket) String() string {
	parts := []string{strconv.FormatUint(t.Nonce, 10)}
	for _, at := range t.Times {
		parts = append(parts, strconv.FormatInt(at.UnixNano(), 10))
	}
	return strings.Join(parts, ".")
}

// ParseTicket reads a ticket as Ticket.String writes it.
func ParseTicket(s string) (Ticket, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 1 && len(parts) != 3 && len(parts) != 5 {
		return Ticket{}, fmt.Errorf("%w: %d times, want 0, 2 or 4", ErrInvalidTicket, len(parts)-1)
	}
	nonce, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil || nonce == 0 {
		return Ticket{}, fmt.Errorf("%w: nonce %q", ErrInvalidTicket, parts[0])
	}
	t := Ticket{Nonce: nonce, Times: make([]time.Time, len(parts)-1)}
	for i, p := range parts[1:] {
		ns, err := strconv.ParseInt(p, 10, 64)
		if err != nil || ns <= 0 {
			return Ticket{}, fmt.Errorf("%w: time %q", ErrInvalidTicket, p)
		}
		t.Times[i] = time.Unix(0, ns)
	}
	return t, nil
}

// Resume returns the attempt of try that Begin allowed with ticket t, for
// its Fail or Succeed, possibly in another process than Begin's: they act
// on the units Begin reserved. Each ticket of an attempt is settled once:
// Resume of a ticket resumed before (in any process sharing the store)
// returns an attempt marked Settled, whose Fail and Succeed do nothing.
// The error wraps ErrInvalidTicket for a ticket older than TicketTTL or
// from the future, and sluice.ErrStore when the store failed.
func (l *Login) Resume(ctx context.Context, try Try, t Ticket) (*Attempt, error) {
	try.IP = try.IP.Unmap().WithZone("")
	a := &Attempt{l: l, try: try, user: l.HashUser(try.Username), ip: l.ipKey(try.IP), Allowed: true, Listed: len(t.Times) == 0}
	now := time.Now()
	if l.c.Clock != nil {
		now = l.c.Clock()
	}
	for _, at := range t.Times {
		if at.Before(now.Add(-TicketTTL)) || at.After(now.Add(time.Minute)) {
			return nil, fmt.Errorf("%w: reserved at %v, not within %v of now", ErrInvalidTicket, at, TicketTTL)
		}
	}
	sum := sha256.Sum256([]byte(a.user + "|" + a.ip + "|" + t.String()))
	d, err := l.settled.Allow(ctx, base64.RawURLEncoding.EncodeToString(sum[:16]))
	if err != nil {
		return nil, fmt.Errorf("guard: login: %w", err)
	}
	if !d.Allowed {
		a.Allowed, a.Settled = false, true
		return a, nil
	}
	lims := []*sluice.Limiter{l.perIPUser, l.perIP, l.user, l.world}
	keys := []string{a.user + "|" + a.ip, a.ip, a.user, ""}
	for i, at := range t.Times {
		a.res = append(a.res, lims[i].Resume(keys[i], 1, at))
	}
	return a, nil
}

// A Settlement is what Settle did with a ticket.
type Settlement struct {
	// Duplicate reports that the ticket was settled before: nothing was
	// done again.
	Duplicate bool
	// Banned reports that the failure made the login's jail ban the
	// address, with Ban.
	Banned bool
	Ban    Ban
}

// Fail ends as a failure (see Attempt.Fail) the attempt of try that
// Begin allowed with the ticket written ticket (see Ticket.String), in
// this process or another: what a service's APIs do with a wrong
// password. The error wraps ErrInvalidTicket (a sluice.ErrInvalidRequest)
// for a malformed or stale ticket, and sluice.ErrStore when the store
// failed.
func (l *Login) Fail(ctx context.Context, try Try, ticket string) (Settlement, error) {
	a, s, err := l.settle(ctx, try, ticket)
	if err != nil {
		return s, err
	}
	s.Ban, s.Banned, err = a.Fail(ctx)
	return s, err
}

// Succeed ends as a success (see Attempt.Succeed) the attempt of try
// that Begin allowed with the ticket written ticket, as Fail does for a
// failure.
func (l *Login) Succeed(ctx context.Context, try Try, ticket string) (Settlement, error) {
	a, s, err := l.settle(ctx, try, ticket)
	if err != nil {
		return s, err
	}
	return s, a.Succeed(ctx)
}

// An Ending ends a login attempt by its ticket: (*Login).Fail or
// (*Login).Succeed, for an API that serves both alike.
type Ending func(l *Login, ctx context.Context, try Try, ticket string) (Settlement, error)

// settle resumes the attempt of try's ticket, for Fail or Succeed.
func (l *Login) settle(ctx context.Context, try Try, ticket string) (*Attempt, Settlement, error) {
	t, err := ParseTicket(ticket)
	if err != nil {
		return nil, Settlement{}, err
	}
	a, err := l.Resume(ctx, try, t)
	if err != nil {
		return nil, Settlement{}, err
	}
	return a, Settlement{Duplicate: a.Settled}, nil
}
