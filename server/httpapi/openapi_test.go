package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestOpenAPIHandler checks how the description is served; package
// server checks what it says against the handlers.
func TestOpenAPIHandler(t *testing.T) {
	tests := []struct {
		method   string
		status   int
		body     []byte
		ctype    string
		allowHdr string
	}{
		{http.MethodGet, 200, OpenAPI(), "application/yaml", ""},
		{http.MethodHead, 200, nil, "application/yaml", ""},
		{http.MethodPost, 405, nil, "application/problem+json", "GET, HEAD"},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		OpenAPIHandler().ServeHTTP(w, httptest.NewRequest(tt.method, "/openapi.yaml", nil))
		if w.Code != tt.status || w.Header().Get("Content-Type") != tt.ctype || w.Header().Get("Allow") != tt.allowHdr {
			t.Errorf("%s /openapi.yaml = %d, Content-Type %q, Allow %q; want %d, %q, %q",
				tt.method, w.Code, w.Header().Get("Content-Type"), w.Header().Get("Allow"), tt.status, tt.ctype, tt.allowHdr)
		}
		if tt.body != nil && !bytes.Equal(w.Body.Bytes(), tt.body) {
			t.Errorf("%s /openapi.yaml body = %.60q…, want the description", tt.method, w.Body)
		}
		if tt.method == http.MethodHead && w.Body.Len() != 0 {
			t.Errorf("HEAD /openapi.yaml body = %d bytes, want none", w.Body.Len())
		}
	}
	if b := OpenAPI(); len(b) == 0 || !bytes.HasPrefix(b, []byte("openapi: 3.1")) {
		t.Errorf("OpenAPI() = %.40q, want an OpenAPI 3.1 document", b)
	}
	OpenAPI()[0] = 'x' // a copy: the next caller still gets the description
	if OpenAPI()[0] != 'o' {
		t.Errorf("OpenAPI() returned the embedded bytes, not a copy")
	}
}
