package httpapi

import (
	"bytes"
	_ "embed"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/internal/jsonhttp"
)

// openapi is the OpenAPI 3.1 description of the service's HTTP API,
// checked against the handlers by the tests of package server.
//
//go:embed openapi.yaml
var openapi []byte

// OpenAPI returns the OpenAPI 3.1 description of sluice serve's HTTP
// API (this package's endpoints, GET /v1/auth, /healthz, /readyz and
// /openapi.yaml), in YAML: a copy, the caller's to keep.
func OpenAPI() []byte { return bytes.Clone(openapi) }

// OpenAPIHandler returns the handler of GET /openapi.yaml: the
// description, as application/yaml, to generate clients from. Methods
// other than GET and HEAD get 405.
func OpenAPIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			jsonhttp.Error(w, http.StatusMethodNotAllowed, r.Method+" not allowed: use GET")
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/yaml")
		h.Set("Content-Length", strconv.Itoa(len(openapi)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(openapi) // the client may be gone; no one to tell
		}
	})
}
