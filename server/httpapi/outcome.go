package httpapi

import (
	"errors"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/wire"
)

func (h *Handler) insert(w http.ResponseWriter, r *http.Request) *apiError {
	var body wire.InsertRequest
	if err := h.decode(w, r, &body); err != nil {
		return err
	}
	if body.Cost == 0 {
		return badRequest("cost is required: non-zero, negative for a reward")
	}
	req, aerr := h.request(body.Rule, body.Key, body.Domain, body.Descriptors, nil)
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
		var body wire.OutcomeRequest
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
		out := wire.OutcomeResponse{CheckResponse: ruleResponse(body.Rule, res.Status), Duplicate: res.Duplicate}
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
	return h.engine.Commit(r.Context(), o)
}

func (h *Handler) refund(r *http.Request, o rules.OutcomeRequest, _ string) (rules.OutcomeResult, error) {
	return h.engine.Refund(r.Context(), o)
}

func (h *Handler) report(r *http.Request, o rules.OutcomeRequest, outcome string) (rules.OutcomeResult, error) {
	return h.engine.Report(r.Context(), o, outcome)
}
