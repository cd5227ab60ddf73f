package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// AdaptiveConfig configures an AdaptivePrefix. The zero value means
// defaults.
type AdaptiveConfig struct {
	// ClientIP finds client addresses. Default: the connection's address.
	ClientIP *ClientIP
	// Steps are the IPv6 prefix lengths, narrowest first, through which a
	// key widens. Default 128, 64, 56, 48: an address, a subnet, and the
	// blocks ISPs commonly delegate to one customer.
	Steps []int
	// Trips is how many distinct keys within one prefix of the next step
	// must be denied within Window before that prefix becomes the key.
	// Default 4.
	Trips int
	// Window is the time over which trips are counted, and how long a
	// prefix stays widened after its last widening. Default one hour.
	Window time.Duration
	// Namespace prefixes the AdaptivePrefix's own keys in the store.
	// Default "sluice".
	Namespace string
}

// An AdaptivePrefix keys IPv4 clients by address and IPv6 clients by a
// prefix that widens under attack: at first by address (/128), then, once
// Trips distinct addresses of one /64 have been denied within Window, by
// that /64 — so that an attacker who owns a /64 (every IPv6 host does)
// cannot get a fresh allowance per address — and likewise from /64 to /56
// and /56 to /48. Widenings live in the store, so every process sharing it
// agrees, and lapse Window after they were last renewed.
//
// Keys are prefixes in CIDR notation ("2001:db8::1/128",
// "203.0.113.7/32"). Each IPv6 request costs one Peek per widened step
// (three by default); each denial a few more store calls.
//
// Create one with NewAdaptivePrefix; it is safe for concurrent use.
type AdaptivePrefix struct {
	client  *ClientIP
	steps   []int
	marks   *sluice.Limiter // per key: its first trip within Window
	trips   *sluice.Limiter // per wider prefix: distinct keys that tripped
	widened *sluice.Limiter // per prefix: denied while widened
}

var (
	_ Tripper     = (*AdaptivePrefix)(nil)
	_ KeyAppender = (*AdaptivePrefix)(nil)
)

// NewAdaptivePrefix returns an AdaptivePrefix keeping its state in store.
func NewAdaptivePrefix(store sluice.Store, c AdaptiveConfig) (*AdaptivePrefix, error) {
	if c.ClientIP == nil {
		c.ClientIP = &ClientIP{}
	}
	if c.Steps == nil {
		c.Steps = []int{128, 64, 56, 48}
	}
	if c.Trips <= 0 {
		c.Trips = 4
	}
	if c.Window <= 0 {
		c.Window = time.Hour
	}
	if len(c.Steps) == 0 || !slices.IsSortedFunc(c.Steps, func(a, b int) int { return b - a }) || c.Steps[0] > 128 || c.Steps[len(c.Steps)-1] < 1 {
		return nil, fmt.Errorf("%w: httplimit: adaptive steps %v must be prefix lengths from 128 down", sluice.ErrInvalidRequest, c.Steps)
	}
	a := &AdaptivePrefix{client: c.ClientIP, steps: slices.Clone(c.Steps)}
	var err error
	mk := func(action string, l sluice.Limit) *sluice.Limiter {
		lim, e := sluice.New(store, sluice.Config{Limits: []sluice.Limit{l}, Action: action, Namespace: c.Namespace})
		if e != nil && err == nil {
			err = e
		}
		return lim
	}
	a.marks = mk("adaptive-mark", sluice.Every(c.Window))
	a.trips = mk("adaptive-trips", sluice.Limit{Rate: c.Trips, Period: c.Window})
	a.widened = mk("adaptive-widened", sluice.Every(c.Window))
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Key returns the request's key: an IPv4 address as a /32, an IPv6
// address as the widest of its widened prefixes, or as a prefix of the
// narrowest step if none is widened. A store failure while looking for
// widened prefixes yields the narrowest.
func (a *AdaptivePrefix) Key(r *http.Request) (string, bool) { return keyString(a, r) }

// AppendKey appends the request's key, as Key returns it, to dst.
func (a *AdaptivePrefix) AppendKey(dst []byte, r *http.Request) ([]byte, bool) {
	ip, ok := a.client.Addr(r)
	if !ok {
		return dst, false
	}
	if ip.Is4() {
		return appendPrefix(dst, ip, 32), true
	}
	for j := len(a.steps) - 1; j >= 1; j-- {
		p := prefixKey(ip, a.steps[j])
		if d, err := a.widened.Peek(r.Context(), p); err == nil && !d.Allowed {
			return append(dst, p...), true
		}
	}
	return appendPrefix(dst, ip, a.steps[0]), true
}

// Trip records that a request under key was denied: the key's first trip
// within Window counts towards widening the prefix of the next step, and
// the trip that reaches Trips widens it. Store errors are ignored:
// widening is a best effort, and the limit itself still applies.
func (a *AdaptivePrefix) Trip(r *http.Request, key string) {
	p, err := netip.ParsePrefix(key)
	if err != nil || !p.Addr().Is6() {
		return
	}
	j := slices.Index(a.steps, p.Bits())
	if j < 0 || j == len(a.steps)-1 {
		return
	}
	ctx := r.Context()
	if d, err := a.marks.Allow(ctx, key); err != nil || !d.Allowed {
		return // not this key's first trip within the window
	}
	parent := prefixKey(p.Addr(), a.steps[j+1])
	d, err := a.trips.Allow(ctx, parent)
	if err != nil || (d.Allowed && d.Remaining > 0) {
		return
	}
	if err := a.widened.Reset(ctx, parent); err == nil {
		_, _ = a.widened.Allow(ctx, parent)
	}
}
