package notify

import (
	"crypto/rand"
	"strings"
	"time"

	"github.com/sluicehq/sluice/guard"
)

// Kind is what happened to a ban.
type Kind string

// The kinds of Event.
const (
	// Ban: a jail banned an actor (its rules' denials, or an admin).
	Ban Kind = "ban"
	// Lift: an admin (the admin API, sluice bans lift) ended a ban.
	Lift Kind = "lift"
	// Expire: a ban reached its end.
	Expire Kind = "expire"
)

// maxField bounds each text field of an Event: a ban's key and reason
// are bounded already (guard.MaxBanKey), this bounds what else may come.
const maxField = 512

// An Event is a ban, a lift or an expiry, as webhooks receive it (JSON)
// and commands see it (the placeholders of Exec). A lifted ban that the
// process did not hold has only its jail and key.
type Event struct {
	// ID identifies the event: the same through every retry of its
	// delivery, so that a receiver can tell a retry from a new event.
	ID string `json:"id"`
	// Kind is "ban", "lift" or "expire".
	Kind Kind `json:"event"`
	// Jail is the jail of the ban.
	Jail string `json:"jail"`
	// Key is the banned actor: an address, a network, or another key
	// (see guard.Ban).
	Key string `json:"key"`
	// Network is, for a ban of an address or a network, the network in
	// CIDR notation ("203.0.113.7/32", "2001:db8::/64"); empty otherwise.
	Network string `json:"network,omitempty"`
	// Reason says why the actor was banned.
	Reason string `json:"reason,omitempty"`
	// Since and Until are when the ban started and when it ends (or
	// ended).
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Offences is how many times the actor was banned within the jail's
	// memory, this ban included.
	Offences int `json:"offences,omitempty"`
	// Collateral is, for a ban of a network the registry merged bans
	// into at capacity, how much it covers beyond its offenders:
	// addresses for IPv4, /64s for IPv6 (see guard.Ban).
	Collateral int64 `json:"collateral,omitempty"`
	// Source names the process that made the event: the one that
	// decided the ban, served the lift, or claimed the expiry.
	Source string `json:"source"`
	// Time is when the event happened.
	Time time.Time `json:"time"`
}

// NewEvent returns the event of kind about b, made by source at t, with
// a new random ID.
func NewEvent(kind Kind, b guard.Ban, source string, t time.Time) Event {
	e := Event{ID: rand.Text(), Kind: kind, Jail: clip(b.Jail), Key: clip(b.Key), Reason: clip(b.Reason),
		Since: b.Since, Until: b.Until, Offences: b.Offences, Collateral: b.Collateral, Source: clip(source), Time: t}
	if !strings.ContainsAny(b.Key, " \t\r\n") {
		if p, err := guard.ParsePrefix(b.Key); err == nil {
			e.Network = p.String()
		}
	}
	return e
}

func clip(s string) string {
	if len(s) > maxField {
		return s[:maxField]
	}
	return s
}

// size estimates the bytes e holds in memory, for Trail's bound.
func (e *Event) size() int {
	const fixed = 200 // the struct, times and headers of the strings
	return fixed + len(e.ID) + len(e.Kind) + len(e.Jail) + len(e.Key) + len(e.Network) + len(e.Reason) + len(e.Source)
}
