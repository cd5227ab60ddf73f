package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/server/rules"
)

// InsertRequest is the body of POST /v1/insert: count Cost whether or not
// it fits (a penalty), or give -Cost back (a reward).
type InsertRequest struct {
	// Rule and Key, or Domain and Descriptors, as in CheckRequest.
	Rule        string       `json:"rule,omitempty"`
	Key         string       `json:"key,omitempty"`
	Domain      string       `json:"domain,omitempty"`
	Descriptors []Descriptor `json:"descriptors,omitempty"`
	// Cost is the number of units: non-zero, at most the rule's burst
	// either way; negative gives units back.
	Cost int `json:"cost"`
}

// OutcomeRequest is the body of POST /v1/reserve, /v1/commit, /v1/refund
// and /v1/report: a named rule, the actor's key, the cost, and the
// client's request id, which makes a retried call count once.
type OutcomeRequest struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
	// Cost is the number of units. Default (0 or absent) 1.
	Cost int `json:"cost,omitempty"`
	// ID is the client's request id, 1 to 128 bytes: unique per
	// reservation or report. A commit or refund repeats its
	// reservation's rule, key, cost and id.
	ID string `json:"id"`
	// Outcome is, for /v1/report, "failure" (counted whether or not it
	// fits, and told to the rule's jail) or "success" (counted nothing).
	Outcome string `json:"outcome,omitempty"`
}

// OutcomeResponse is the answer to an outcome call: the rule's answer,
// as CheckResponse gives it, and what became of the call.
type OutcomeResponse struct {
	CheckResponse
	// Duplicate reports that the id was seen before: nothing was counted
	// again.
	Duplicate bool `json:"duplicate,omitempty"`
	// Expires is, for a reservation that took its cost, when it stops
	// waiting for its commit or refund (RFC 3339): after that it stays
	// counted. Absent when nothing was taken.
	Expires *time.Time `json:"expires,omitempty"`
}

func (h *Handler) insert(w http.ResponseWriter, r *http.Request) *apiError {
	var body InsertRequest
	if err := h.decode(w, r, &body); err != nil {
		return err
	}
	if body.Cost == 0 {
		return badRequest("cost is required: non-zero, negative for a reward")
	}
	req, aerr := h.request(body.Rule, body.Key, body.Domain, body.Descriptors)
	if aerr != nil {
		return aerr
	}
	req.Op, req.Cost = sluice.OpInsert, body.Cost
	res, err := h.engine.Check(r.Context(), req)
	if err != nil {
		return h.engineError(r, req.Domain, err)
	}
	for _, st := range res.Statuses {
		if errors.Is(st.Err, sluice.ErrCostExceedsBurst) {
			return badRequest("cost %d exceeds the burst of rule %q: at most %d either way", body.Cost, st.Rule.ID, st.Rule.MaxCost())
		}
	}
	resp, bind := ruleResponse(body.Rule, res.Statuses[0]), res.Statuses[0]
	if body.Domain != "" {
		resp, bind = descriptorsResponse(res)
	}
	setHeaders(w.Header(), bind)
	jsonhttp.Write(w, http.StatusOK, resp)
	return nil
}

// outcome serves one of the outcome calls, which call does with the
// engine.
func (h *Handler) outcome(call func(*http.Request, rules.OutcomeRequest, string) (rules.OutcomeResult, error)) func(http.ResponseWriter, *http.Request) *apiError {
	return func(w http.ResponseWriter, r *http.Request) *apiError {
		var body OutcomeRequest
		if err := h.decode(w, r, &body); err != nil {
			return err
		}
		if body.Rule != "" && !h.engine.IsNamed(body.Rule) {
			return badRequest("unknown rule %q (want one of %s)", body.Rule, h.names)
		}
		o := rules.OutcomeRequest{Rule: body.Rule, Key: body.Key, Cost: body.Cost, ID: body.ID}
		res, err := call(r, o, body.Outcome)
		if errors.Is(err, rules.ErrNoReservation) {
			return &apiError{http.StatusConflict, err.Error()}
		}
		if err != nil {
			return h.engineError(r, body.Rule, err)
		}
		out := OutcomeResponse{CheckResponse: ruleResponse(body.Rule, res.Status), Duplicate: res.Duplicate}
		if !res.Expires.IsZero() {
			out.Expires = &res.Expires
		}
		setHeaders(w.Header(), res.Status)
		jsonhttp.Write(w, http.StatusOK, out)
		return nil
	}
}

func (h *Handler) reserve(r *http.Request, o rules.OutcomeRequest, _ string) (rules.OutcomeResult, error) {
	return h.engine.Reserve(r.Context(), o)
}

func (h *Handler) commit(r *http.Request, o rules.OutcomeRequest, _ string) (rules.OutcomeResult, error) {
	return h.engine.Settle(r.Context(), o, false)
}

func (h *Handler) refund(r *http.Request, o rules.OutcomeRequest, _ string) (rules.OutcomeResult, error) {
	return h.engine.Settle(r.Context(), o, true)
}

func (h *Handler) report(r *http.Request, o rules.OutcomeRequest, outcome string) (rules.OutcomeResult, error) {
	return h.engine.Report(r.Context(), o, outcome)
}
