// Package jsonhttp reads and writes the JSON bodies of sluice serve's
// HTTP APIs: one strict way to decode a request, one shape of error.
package jsonhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/sluicehq/sluice/wire"
)

// Write answers status with v in JSON, not to be cached.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	write(w, status, v)
}

// write answers status with v, of the Content-Type already set.
func write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// The client may be gone; there is no one to tell.
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers status with the problem details of msg, a
// wire.ErrorResponse, as application/problem+json.
func Error(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/problem+json")
	write(w, status, wire.ErrorResponse{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: msg, Error: msg})
}

// IsJSON reports whether r's body is declared JSON: an application/json
// Content-Type, which a browser cannot send to another origin without a
// preflight, so that no web page can make a visitor's browser post to an
// endpoint that checks it (a form can only send text/plain, urlencoded
// or multipart bodies).
func IsJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// RequirePost answers 405 (with Allow) or 415, and reports false,
// unless r is a POST whose body is declared JSON: what every POST
// endpoint of the service requires before it reads a body.
func RequirePost(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		Error(w, http.StatusMethodNotAllowed, r.Method+" not allowed: use POST")
		return false
	}
	return RequireJSON(w, r)
}

// RequireJSON answers 415 and reports false unless r's body is declared
// JSON (see IsJSON).
func RequireJSON(w http.ResponseWriter, r *http.Request) bool {
	if IsJSON(r) {
		return true
	}
	Error(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
	return false
}

// Decode reads exactly one JSON object of at most max bytes from r's
// body into v, refusing unknown fields and anything after the object.
// On failure it returns the status to answer (400, or 413 for a body
// over max) and why.
func Decode(w http.ResponseWriter, r *http.Request, max int64, v any) (int, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			err = errors.New("trailing data after the JSON object")
			if tooLarge(terr) {
				err = terr
			}
		}
	}
	switch {
	case err == nil:
		return 0, nil
	case tooLarge(err):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("%w (at most %d bytes)", err, max)
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, errors.New("empty body: want a JSON object")
	}
	return http.StatusBadRequest, fmt.Errorf("malformed request: %w", err)
}

func tooLarge(err error) bool {
	_, ok := errors.AsType[*http.MaxBytesError](err)
	return ok
}
