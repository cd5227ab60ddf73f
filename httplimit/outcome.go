package httplimit

import (
	"context"
	"net/http"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpstatus"
)

// An Outcome is what the middleware decided for a request. Handlers read
// it with OutcomeOf; the Deny handler reads it to answer.
type Outcome struct {
	// Policy names the limit the Decision describes: the rule's Name, or
	// for a rule of several limits, its name and the limit's period
	// ("api-1h").
	Policy string
	// Decision is the binding decision: the denying one when Denied,
	// otherwise that of the Enforce rule with the fewest remaining.
	Decision sluice.Decision
	// Denied reports that an Enforce rule denied the request.
	Denied bool
	// Shadowed reports that a Shadow rule denied the request: it goes
	// through, and the handler should skip its side effects.
	Shadowed bool
	// DryRun reports that a DryRun rule would have denied the request.
	DryRun bool
	// StoreFailed reports that the store failed and the middleware fails
	// closed: the request is refused with 503.
	StoreFailed bool
}

type outcomeKey struct{}

type exemptKey struct{}

// outcomeCtx is the context of a request that carries an Outcome. It is
// made only for requests that need one (see Config.AttachOutcome): the
// request copy that carries it is the largest cost of the middleware.
type outcomeCtx struct {
	context.Context
	out Outcome
}

// Value returns the Outcome for its key and defers to the parent context
// for every other key, so cancellation and values pass through.
func (c *outcomeCtx) Value(key any) any {
	if key == (outcomeKey{}) {
		return &c.out
	}
	return c.Context.Value(key)
}

// withOutcome returns r carrying o.
func withOutcome(r *http.Request, o *Outcome) *http.Request {
	return r.WithContext(&outcomeCtx{Context: r.Context(), out: *o})
}

// reqState is the one allocation the middleware makes for a request it
// lets through: the bytes of the keys it derives and of the header values
// it writes, the header values' slices, and the status recorder of
// response-based counting. Nothing in it is reused after the request, so
// strings may point into it (see str).
type reqState struct {
	b    []byte // arr, or its replacement if it outgrew it
	vals [maxValues]string
	nv   int
	sw   httpstatus.Writer
	arr  [72]byte
}

// maxValues is how many header values a request may get from st: enough
// for RateLimit-Policy, RateLimit, Retry-After and the problem answer's
// Content-Type, Cache-Control and Content-Length, or for an allowed
// request with the legacy trio. More values cost an allocation each.
const maxValues = 6

func newReqState() *reqState {
	st := new(reqState)
	st.b = st.arr[:0]
	return st
}

// str returns st.b[from:] as a string, without copying. The bytes are
// never written again: st.b only grows, and a reallocation leaves the
// old array, still referenced by the strings, as it was.
func (st *reqState) str(from int) string {
	b := st.b[from:]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// set sets header key to the single value v, with the value's slice in
// st rather than a new allocation.
func (st *reqState) set(h http.Header, key, v string) {
	if st.nv == maxValues {
		h[key] = []string{v}
		return
	}
	st.vals[st.nv] = v
	h[key] = st.vals[st.nv : st.nv+1 : st.nv+1]
	st.nv++
}

// OutcomeOf returns the middleware's Outcome for r, and false if none is
// attached: no Middleware decided r, or one let r through unmarked
// without Config.AttachOutcome. Requests a Shadow or DryRun rule denied,
// and requests given to Config.Deny, always carry their Outcome.
func OutcomeOf(r *http.Request) (Outcome, bool) {
	return FromContext(r.Context())
}

// FromContext returns the Outcome carried by ctx, as OutcomeOf does.
func FromContext(ctx context.Context) (Outcome, bool) {
	if o, ok := ctx.Value(outcomeKey{}).(*Outcome); ok {
		return *o, true
	}
	return Outcome{}, false
}

// Shadowed reports whether a Shadow rule denied r: the handler should
// answer as usual but skip what the request would cause (send nothing,
// store nothing), so that a spammer does not learn it was caught.
func Shadowed(r *http.Request) bool {
	o, _ := OutcomeOf(r)
	return o.Shadowed
}

// Exempt returns r marked so that every Middleware lets it through
// uncounted: for requests an allow list admits (see package guard).
func Exempt(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), exemptKey{}, true))
}

func exempt(ctx context.Context) bool {
	v, _ := ctx.Value(exemptKey{}).(bool)
	return v
}
