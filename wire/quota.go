package wire

// QuotaRequest is the body of POST /v1/quota: a report of one bucket by
// one holder (a Go program deciding locally, or any client that is not
// an Envoy), asking for its share of the bucket's rule, as an RLQS
// stream reports a bucket. The service maps the domain and bucket to a
// rule as it maps Envoy's (the quota section of its configuration).
type QuotaRequest struct {
	// Domain and Bucket name the bucket: a domain of the configuration's
	// quota buckets, and the bucket id's entries (1 to 16, each key and
	// value non-empty, 1 KiB in all).
	Domain string            `json:"domain"`
	Bucket map[string]string `json:"bucket"`
	// Holder names the holder: 1 to 48 printable ASCII bytes, unique
	// among the holders of the bucket, the same at every report.
	Holder string `json:"holder"`
	// Allowed and Denied count the requests decided since the previous
	// report.
	Allowed uint64 `json:"allowed"`
	Denied  uint64 `json:"denied"`
	// Checked counts the requests the holder had decided by the service
	// itself (per-request checks, while it held no share) since the
	// previous report: they measure its demand, and are not counted
	// again in the rule's state.
	Checked uint64 `json:"checked,omitempty"`
	// Elapsed is how long, in seconds, since the previous report of the
	// bucket; 0 for the first, whose demand is not known yet.
	Elapsed float64 `json:"elapsed,omitempty"`
	// Release gives the holder's share back: it no longer decides under
	// the bucket.
	Release bool `json:"release,omitempty"`
}

// QuotaResponse answers POST /v1/quota with status 200: the holder's
// share until TTL, or a blanket rule.
type QuotaResponse struct {
	// Bucket is the configured bucket the report was mapped to; empty
	// for an unknown one.
	Bucket string `json:"bucket,omitempty"`
	// Blanket is "allow" or "deny" when the holder gets no share but a
	// rule for every request until TTL (an unknown bucket, a banned
	// actor, a store down under an open or closed failure policy, no
	// share left for now); empty with a share.
	Blanket string `json:"blanket,omitempty"`
	// Reason says why a blanket rule: unknown, overflow, oversize, full,
	// no-share, store, allow-list, deny-list or banned.
	Reason string `json:"reason,omitempty"`
	// Rate is the share: requests per Period, decided by a token bucket
	// of Burst tokens that fills at that rate.
	Rate   int     `json:"rate"`
	Period float64 `json:"period"`
	Burst  int     `json:"burst"`
	// Limit is the rule's limit the shares divide, per Period.
	Limit int `json:"limit"`
	// TTL is how long, in seconds, the answer holds: report again
	// before it runs out.
	TTL float64 `json:"ttl"`
}

// QuotaStats are what the edges of one replica hold and report of one
// configured quota bucket (Bucket "-": the unknown ones), as the admin
// dashboard shows them (its live feed's quota).
type QuotaStats struct {
	Bucket string `json:"bucket"`
	// Clients counts the bucket ids held by open RLQS streams (HTTP
	// holders hold no stream and are not counted).
	Clients int `json:"clients"`
	// Assigned is the sum of the shares assigned to them, in units of
	// the rule's rate (per its period).
	Assigned int `json:"assigned"`
	// Blankets counts, of Clients, those holding a blanket rule.
	Blankets int `json:"blankets"`
	// Allowed and Denied count the requests the edges reported, since
	// the service started.
	Allowed uint64 `json:"allowed"`
	Denied  uint64 `json:"denied"`
}
