package envoyrls

import (
	"errors"
	"io"
	"net/http"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/jsonhttp"
)

// JSONHandler returns envoyproxy/ratelimit's HTTP endpoint, /json, for s,
// so that its HTTP clients switch as its Envoys do: POST a
// RateLimitRequest in protobuf's JSON mapping, such as
//
//	{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "203.0.113.7"}]}]}
//
// and get the RateLimitResponse in the same mapping, with status 200 when
// it is OK and 429 when it is OVER_LIMIT; a response's header fields to
// add (Config.ResponseHeaders) are also set on the HTTP response. A body
// that is not a request is 400, one over DefaultMaxMessageBytes 413, a
// method other than POST 405, and a store failure 503 (envoyproxy/ratelimit
// answers 400 for every error, which hides an outage from the client).
//
// The request must say Content-Type: application/json, or it is 415:
// a request spends limits, and a cross-site form (which can only send
// text/plain, urlencoded or multipart bodies, and no other type without
// the preflight a server never answers) must not be able to spend them
// from a visitor's browser. envoyproxy/ratelimit accepts any type; its
// clients that send none must add the header.
func JSONHandler(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		if !jsonhttp.IsJSON(r) {
			http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, DefaultMaxMessageBytes))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		var req pb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, "not a RateLimitRequest: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := s.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			code := http.StatusServiceUnavailable
			if status.Code(err) == codes.InvalidArgument {
				code = http.StatusBadRequest
			}
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil { // a response of this package always marshals
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, h := range resp.GetResponseHeadersToAdd() {
			w.Header().Set(h.GetKey(), h.GetValue())
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out)
	})
}
