package rlqs

import (
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/wire"
)

// maxBody bounds the body of POST /v1/quota: a bucket id of at most
// config.MaxBucketBytes, escaped, and a few numbers.
const maxBody = 16 << 10

// Handler returns the HTTP door of the quotas, POST /v1/quota: a
// wire.QuotaRequest in, a wire.QuotaResponse out (200), decided as an
// RLQS report of the bucket is, except that the holder tells the time
// since its previous report (a holder's reports may reach different
// replicas). A malformed body, an invalid bucket id or holder, or an
// elapsed time outside 0 to an hour is a 400. Unlike a stream, the door
// keeps nothing per holder: a holder that stops reporting gives its
// share back when it expires, and a release gives it back at once.
func (s *Service) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !jsonhttp.RequirePost(w, r) {
			return
		}
		var in wire.QuotaRequest
		if code, err := jsonhttp.Decode(w, r, maxBody, &in); err != nil {
			jsonhttp.Error(w, code, err.Error())
			return
		}
		fits, valid := idSize(in.Bucket)
		switch {
		case in.Domain == "":
			jsonhttp.Error(w, http.StatusBadRequest, "domain: required")
			return
		case !valid || !fits:
			jsonhttp.Error(w, http.StatusBadRequest, "bucket: want 1 to 16 entries, each key and value non-empty, 1024 bytes in all")
			return
		case !validClient(in.Holder):
			jsonhttp.Error(w, http.StatusBadRequest, "holder: want 1 to 48 printable ASCII bytes")
			return
		case !(in.Elapsed >= 0 && in.Elapsed <= 3600):
			jsonhttp.Error(w, http.StatusBadRequest, "elapsed: want seconds from 0 to 3600")
			return
		}
		req := &request{domain: in.Domain, id: in.Bucket, key: keyOf(in.Bucket), holder: "h:" + in.Holder,
			allowed: in.Allowed, denied: in.Denied, perSecond: sluice.KeepDemand} // a holder that asks again after a restart keeps its demand
		if in.Release {
			jsonhttp.Write(w, http.StatusOK, s.giveBack(r, req))
			return
		}
		if in.Elapsed > 0 {
			n := float64(in.Allowed) + float64(in.Denied) + float64(in.Checked)
			req.perSecond = demandOf(n, in.Elapsed)
		}
		a := s.assign(r.Context(), req)
		s.c.Metrics.sent(a)
		jsonhttp.Write(w, http.StatusOK, response(a))
	})
}

// giveBack releases the share of req's holder in its bucket, and answers
// the bucket with no share.
func (s *Service) giveBack(r *http.Request, req *request) wire.QuotaResponse {
	cfg := s.c.Config()
	b := match(quotaOf(cfg), req.domain, req.id)
	if b == nil {
		return response(s.blanket(quotaOf(cfg), "", reasonUnknown))
	}
	rule, _ := cfg.Rule(b.Rule)
	s.release(r.Context(), b.Rule, rule.Limits[0], req.key, req.holder)
	return wire.QuotaResponse{Bucket: b.Name, Limit: rule.Limits[0].Rate, Period: rule.Limits[0].Period.Seconds()}
}

// response is the wire form of a.
func response(a answer) wire.QuotaResponse {
	out := wire.QuotaResponse{Bucket: a.bucket, Reason: a.reason, Limit: a.limit.Rate, Period: a.period.Seconds(), TTL: a.ttl.Seconds()}
	switch a.kind {
	case assign:
		out.Rate, out.Burst = a.rate, a.tokens
	case allowAll:
		out.Blanket = "allow"
	default:
		out.Blanket = "deny"
	}
	return out
}

// demandOf is the demand, in requests a second, of n requests over
// elapsed seconds, and two more: an idle holder keeps a share of two
// requests a second, and a holder that wants less than the others is not
// held to the very count of its last interval (whose arrivals a uniform
// load shifts by one either way). Larger random swings are for the token
// bucket's burst (config.Quota.Burst) to absorb: a margin in proportion
// to each demand would be held unused by the holders that want less than
// the others, and taken from those that want more.
func demandOf(n, elapsed float64) float64 {
	return n/elapsed + 2
}
