package httpapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/wire"
)

// checkBody is the body of POST /v1/check: one check, or a batch.
type checkBody struct {
	wire.CheckRequest
	Checks []wire.CheckRequest `json:"checks"`
}

func (h *Handler) check(w http.ResponseWriter, r *http.Request) *apiError {
	var body checkBody
	if err := h.decode(w, r, &body); err != nil {
		return err
	}
	if body.Checks != nil {
		return h.checkBatch(w, r, body)
	}
	resp, bind, err := h.checkOne(r, body.CheckRequest)
	if err != nil {
		return err
	}
	setHeaders(w.Header(), bind)
	jsonhttp.Write(w, http.StatusOK, resp)
	return nil
}

// checkBatch answers a batch of checks, each on its own: a check the
// client got wrong is answered with its error in its place.
func (h *Handler) checkBatch(w http.ResponseWriter, r *http.Request, body checkBody) *apiError {
	one := body.CheckRequest
	switch {
	case one.Rule != "" || one.Key != "" || one.Domain != "" || one.Descriptors != nil || one.Cost != 0 || one.Peek:
		return badRequest("give checks, or the fields of one check, not both")
	case len(body.Checks) == 0:
		return badRequest("checks is empty: give 1 to %d", h.batch)
	case len(body.Checks) > h.batch:
		return badRequest("%d checks: at most %d in one batch", len(body.Checks), h.batch)
	}
	out := wire.BatchResponse{Results: make([]wire.CheckResponse, len(body.Checks))}
	for i, c := range body.Checks {
		resp, _, err := h.checkOne(r, c)
		switch {
		case err == nil:
			out.Results[i] = resp
		case err.status == http.StatusBadRequest:
			out.Results[i] = wire.CheckResponse{Error: err.msg}
		default:
			return err
		}
	}
	jsonhttp.Write(w, http.StatusOK, out)
	return nil
}

// checkOne decides one check, and returns the status whose rule binds
// (for the response's header fields). The descriptors and statuses of a
// check of a few (the common case: one) stay on the stack: the engine
// keeps nothing of them, and the answer copies what it shows.
func (h *Handler) checkOne(r *http.Request, c wire.CheckRequest) (wire.CheckResponse, rules.Status, *apiError) {
	var descs [2]rules.Descriptor
	req, aerr := h.request(c.Rule, c.Key, c.Domain, c.Descriptors, descs[:0])
	if aerr != nil {
		return wire.CheckResponse{}, rules.Status{}, aerr
	}
	req.Cost = c.Cost
	if c.Peek {
		req.Op = sluice.OpPeek
	}
	var sts [2]rules.Status
	res := rules.Result{Statuses: sts[:0]}
	if err := h.engine.CheckInto(r.Context(), req, &res); err != nil {
		// Named from c, not req: a req that reached the log would take
		// its descriptors to the heap.
		return wire.CheckResponse{}, rules.Status{}, h.engineError(r, cmp.Or(c.Domain, c.Rule), err)
	}
	for _, st := range res.Statuses {
		if errors.Is(st.Err, sluice.ErrCostExceedsBurst) {
			return wire.CheckResponse{}, rules.Status{}, badRequest("cost %d exceeds the burst of rule %q: at most %d at once", max(c.Cost, 1), st.Rule.ID, st.Rule.MaxCost())
		}
	}
	if c.Domain != "" {
		resp, bind := descriptorsResponse(res)
		return resp, bind, nil
	}
	return ruleResponse(c.Rule, res.Statuses[0]), res.Statuses[0], nil
}

// ruleResponse renders the status of a check of a named rule.
func ruleResponse(rule string, st rules.Status) wire.CheckResponse {
	if st.Guard == guard.Exempt {
		return wire.CheckResponse{Allowed: true, Rule: rule, Guard: st.Guard.String()}
	}
	resp := NewCheckResponse(rule, st.Verdict())
	resp.Shadowed = st.Shadowed
	if st.Guard != guard.Pass {
		resp.Guard = st.Guard.String()
	}
	return resp
}

// descriptorsResponse renders the result of a check of descriptors: the
// overall answer, the binding descriptor's limit, and every status; and
// returns the binding status.
func descriptorsResponse(res rules.Result) (wire.CheckResponse, rules.Status) {
	resp := wire.CheckResponse{Allowed: res.Allowed, Statuses: make([]wire.DescriptorStatus, len(res.Statuses))}
	bind := -1
	for i, st := range res.Statuses {
		resp.Statuses[i] = descriptorStatus(st)
		resp.Shadowed = resp.Shadowed || st.Shadowed
		if st.Rule != nil && !st.Rule.Unlimited && st.Guard != guard.Exempt &&
			(bind < 0 || st.Verdict().Binds(res.Statuses[bind].Verdict())) {
			bind = i
		}
	}
	if bind < 0 {
		return resp, rules.Status{}
	}
	b := resp.Statuses[bind]
	resp.Rule, resp.Limit, resp.Policy, resp.Remaining, resp.ResetAfter, resp.RetryAfter = b.Rule, b.Limit, b.Policy, b.Remaining, b.ResetAfter, b.RetryAfter
	resp.Guard = b.Guard
	if res.Allowed {
		resp.RetryAfter = 0
	}
	return resp, res.Statuses[bind]
}

// descriptorStatus renders the status of one descriptor.
func descriptorStatus(st rules.Status) wire.DescriptorStatus {
	ds := wire.DescriptorStatus{Allowed: st.Allowed, Shadowed: st.Shadowed}
	if st.Replaced != nil {
		ds.Replaced = st.Replaced.ID
	}
	if st.Guard != guard.Pass {
		ds.Guard = st.Guard.String()
	}
	ru := st.Rule
	switch {
	case ru == nil:
	case ru.Unlimited:
		ds.Rule, ds.Unlimited = ru.ID, true
	case st.Guard == guard.Exempt:
		ds.Rule = ru.ID // allowed by the list: no limit to describe
	default:
		c := NewCheckResponse(ru.ID, st.Verdict())
		ds.Rule, ds.Limit, ds.Policy, ds.Remaining, ds.ResetAfter, ds.RetryAfter = ru.ID, c.Limit, c.Policy, c.Remaining, c.ResetAfter, c.RetryAfter
	}
	return ds
}

// setHeaders sets the RateLimit fields (and Retry-After) of the status
// that binds a check, unless the lists decided it: they have no limit
// to describe, nor a time to retry after.
func setHeaders(h http.Header, st rules.Status) {
	if st.Rule == nil || st.Guard == guard.Exempt || st.Guard == guard.Refuse {
		return
	}
	st.Rule.SetHeaders(h, st.Verdict())
}

func (h *Handler) reset(w http.ResponseWriter, r *http.Request) *apiError {
	var req wire.ResetRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	rr, aerr := h.request(req.Rule, req.Key, req.Domain, req.Descriptors, nil)
	if aerr != nil {
		return aerr
	}
	rr.Op = sluice.OpReset
	if _, err := h.engine.Check(r.Context(), rr); err != nil {
		return h.engineError(r, rr.Domain, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// request builds the engine's request for a named rule and key, or for a
// domain and descriptors, whose descriptors it appends to buf: what the
// API's fields must hold, the engine checks the rest.
func (h *Handler) request(rule, key, domain string, descs []wire.Descriptor, buf []rules.Descriptor) (rules.Request, *apiError) {
	switch {
	case domain != "" && (rule != "" || key != ""):
		return rules.Request{}, badRequest("give rule and key, or domain and descriptors, not both")
	case domain != "" && len(descs) == 0:
		return rules.Request{}, badRequest("descriptors are required with a domain")
	case domain != "":
		return rules.Request{Domain: domain, Descriptors: descriptors(descs, buf)}, nil
	case descs != nil:
		return rules.Request{}, badRequest("descriptors need a domain")
	case rule == "":
		return rules.Request{}, badRequest("rule is required (one of %s)", h.names)
	case !h.engine.IsNamed(rule):
		return rules.Request{}, badRequest("unknown rule %q (want one of %s)", rule, h.names)
	case key == "":
		return rules.Request{}, badRequest("key is required")
	}
	return rules.Request{Domain: rule, Descriptors: append(buf, rules.Key(key))}, nil
}

// descriptors appends the engine's descriptors of the API's descs to
// buf, their entries in one allocation for them all.
func descriptors(descs []wire.Descriptor, buf []rules.Descriptor) []rules.Descriptor {
	n := 0
	for _, d := range descs {
		n += len(d.Entries)
	}
	es := make([]rules.Entry, 0, n)
	for _, d := range descs {
		from := len(es)
		for _, e := range d.Entries {
			es = append(es, rules.Entry{Key: e.Key, Value: e.Value})
		}
		buf = append(buf, rules.Descriptor{Entries: es[from:len(es):len(es)]})
	}
	return buf
}

// engineError maps an error of the engine to an answer: the client's
// fault is a 400, anything else means the store failed.
func (h *Handler) engineError(r *http.Request, domain string, err error) *apiError {
	switch {
	case errors.Is(err, rules.ErrUnknownDomain):
		return badRequest("unknown domain %q (want one of %s)", domain, h.names)
	case errors.Is(err, sluice.ErrInvalidRequest), errors.Is(err, sluice.ErrCostExceedsBurst):
		return badRequest("%v", err)
	case r.Context().Err() != nil || errors.Is(err, context.Canceled):
		return &apiError{http.StatusServiceUnavailable, "request cancelled"}
	}
	h.log.ErrorContext(r.Context(), "store failed", "rule", domain, "err", err)
	return &apiError{http.StatusServiceUnavailable, "the store failed to decide; try again"}
}
