package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server/rules"
)

// checkBody is the body of POST /v1/check: one check, or a batch.
type checkBody struct {
	CheckRequest
	Checks []CheckRequest `json:"checks"`
}

func (s *Server) check(w http.ResponseWriter, r *http.Request) *apiError {
	var body checkBody
	if err := decode(r.Body, &body); err != nil {
		return err
	}
	if body.Checks == nil {
		resp, bind, err := s.checkOne(r, body.CheckRequest)
		if err != nil {
			return err
		}
		setHeaders(w.Header(), bind)
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	one := body.CheckRequest
	switch {
	case one.Rule != "" || one.Key != "" || one.Domain != "" || one.Descriptors != nil || one.Cost != 0 || one.Peek:
		return badRequest("give checks, or the fields of one check, not both")
	case len(body.Checks) == 0:
		return badRequest("checks is empty: give 1 to %d", s.batch)
	case len(body.Checks) > s.batch:
		return badRequest("%d checks: at most %d in one batch", len(body.Checks), s.batch)
	}
	out := BatchResponse{Results: make([]CheckResponse, len(body.Checks))}
	for i, c := range body.Checks {
		resp, _, err := s.checkOne(r, c)
		switch {
		case err == nil:
			out.Results[i] = resp
		case err.status == http.StatusBadRequest:
			out.Results[i] = CheckResponse{Error: err.msg}
		default:
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkOne decides one check, and returns the status whose rule binds
// (for the response's header fields).
func (s *Server) checkOne(r *http.Request, c CheckRequest) (CheckResponse, rules.Status, *apiError) {
	op := sluice.OpTake
	if c.Peek {
		op = sluice.OpPeek
	}
	if c.Cost < 0 {
		return CheckResponse{}, rules.Status{}, badRequest("cost %d must be at least 1", c.Cost)
	}
	req, aerr := s.request(c.Rule, c.Key, c.Domain, c.Descriptors)
	if aerr != nil {
		return CheckResponse{}, rules.Status{}, aerr
	}
	req.Cost, req.Op = c.Cost, op
	res, err := s.engine.Check(r.Context(), req)
	if err != nil {
		return CheckResponse{}, rules.Status{}, s.engineError(r, req.Domain, err)
	}
	for _, st := range res.Statuses {
		if errors.Is(st.Err, sluice.ErrCostExceedsBurst) {
			return CheckResponse{}, rules.Status{}, badRequest("cost %d exceeds the burst of rule %q: at most %d at once", max(c.Cost, 1), st.Rule.ID, st.Rule.MaxCost())
		}
	}
	if c.Domain == "" {
		st := res.Statuses[0]
		resp := newCheckResponse(c.Rule, verdict(st))
		resp.Shadowed = st.Shadowed
		if st.Guard != rules.Pass {
			resp.Guard = st.Guard.String()
			if st.Guard == rules.Exempt {
				resp = CheckResponse{Allowed: true, Rule: c.Rule, Guard: resp.Guard}
			}
		}
		return resp, st, nil
	}
	return descriptorsResponse(res)
}

// descriptorsResponse renders the result of a check of descriptors: the
// overall answer, the binding descriptor's limit, and every status.
func descriptorsResponse(res rules.Result) (CheckResponse, rules.Status, *apiError) {
	resp := CheckResponse{Allowed: res.Allowed, Statuses: make([]DescriptorStatus, len(res.Statuses))}
	bind := -1
	for i, st := range res.Statuses {
		ds := DescriptorStatus{Allowed: st.Allowed, Shadowed: st.Shadowed}
		if st.Replaced != nil {
			ds.Replaced = st.Replaced.ID
		}
		if st.Guard != rules.Pass {
			ds.Guard = st.Guard.String()
		}
		if ru := st.Rule; ru != nil {
			ds.Rule = ru.ID
			switch {
			case ru.Unlimited:
				ds.Unlimited = true
			case st.Guard == rules.Exempt:
				// allowed by the list: no limit to describe
			default:
				c := newCheckResponse(ru.ID, verdict(st))
				ds.Limit, ds.Policy, ds.Remaining, ds.ResetAfter, ds.RetryAfter = c.Limit, c.Policy, c.Remaining, c.ResetAfter, c.RetryAfter
				if bind < 0 || verdict(st).Binds(verdict(res.Statuses[bind])) {
					bind = i
				}
			}
		}
		resp.Statuses[i] = ds
		resp.Shadowed = resp.Shadowed || st.Shadowed
	}
	if bind < 0 {
		return resp, rules.Status{}, nil
	}
	b := resp.Statuses[bind]
	resp.Rule, resp.Limit, resp.Policy, resp.Remaining, resp.ResetAfter, resp.RetryAfter = b.Rule, b.Limit, b.Policy, b.Remaining, b.ResetAfter, b.RetryAfter
	resp.Guard = b.Guard
	if res.Allowed {
		resp.RetryAfter = 0
	}
	return resp, res.Statuses[bind], nil
}

// setHeaders sets the RateLimit fields (and Retry-After) of the status
// that binds a check, unless the lists decided it: they have no limit
// to describe, nor a time to retry after.
func setHeaders(h http.Header, st rules.Status) {
	if st.Rule == nil || st.Guard == rules.Exempt || st.Guard == rules.Refuse {
		return
	}
	st.Rule.SetHeaders(h, verdict(st))
}

// verdict is a status's decision as the client sees it: a shadow rule's
// denial is an admission.
func verdict(st rules.Status) sluice.Decision {
	d := st.Decision
	if st.Allowed && !d.Allowed {
		d.Allowed, d.RetryAfter = true, 0
	}
	return d
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) *apiError {
	var req ResetRequest
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	rr, aerr := s.request(req.Rule, req.Key, req.Domain, req.Descriptors)
	if aerr != nil {
		return aerr
	}
	rr.Op = sluice.OpReset
	if _, err := s.engine.Check(r.Context(), rr); err != nil {
		return s.engineError(r, rr.Domain, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// request builds the engine's request for a named rule and key, or for a
// domain and descriptors.
func (s *Server) request(rule, key, domain string, descs []Descriptor) (rules.Request, *apiError) {
	if domain == "" {
		if descs != nil {
			return rules.Request{}, badRequest("descriptors need a domain")
		}
		if _, err := s.rule(rule, key); err != nil {
			return rules.Request{}, err
		}
		return rules.Request{Domain: rule, Descriptors: []rules.Descriptor{rules.Key(key)}}, nil
	}
	switch {
	case rule != "" || key != "":
		return rules.Request{}, badRequest("give rule and key, or domain and descriptors, not both")
	case !s.engine.HasDomain(domain):
		return rules.Request{}, badRequest("unknown domain %q (want one of %s)", domain, s.names)
	case len(descs) == 0:
		return rules.Request{}, badRequest("descriptors are required with a domain")
	}
	out := rules.Request{Domain: domain, Descriptors: make([]rules.Descriptor, len(descs))}
	for i, d := range descs {
		if len(d.Entries) == 0 {
			return rules.Request{}, badRequest("descriptor %d has no entries", i)
		}
		es := make([]rules.Entry, len(d.Entries))
		for j, e := range d.Entries {
			es[j] = rules.Entry{Key: e.Key, Value: e.Value}
		}
		out.Descriptors[i].Entries = es
	}
	return out, nil
}

// engineError maps an error of the engine to an answer: the client's
// fault is a 400, anything else means the store failed.
func (s *Server) engineError(r *http.Request, domain string, err error) *apiError {
	switch {
	case errors.Is(err, rules.ErrUnknownDomain):
		return badRequest("unknown rule or domain %q (want one of %s)", domain, s.names)
	case errors.Is(err, sluice.ErrInvalidRequest), errors.Is(err, sluice.ErrCostExceedsBurst):
		return badRequest("%v", err)
	case r.Context().Err() != nil || errors.Is(err, context.Canceled):
		return &apiError{http.StatusServiceUnavailable, "request cancelled"}
	}
	s.log.ErrorContext(r.Context(), "store failed", "rule", domain, "err", err)
	return &apiError{http.StatusServiceUnavailable, "the store failed to decide; try again"}
}
