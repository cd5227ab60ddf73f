package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server/rules"
)

// DefaultMaxBodyBytes is the default bound on a request body: far more
// than any valid request needs, little enough that no client can make the
// server buffer much.
const DefaultMaxBodyBytes = 64 << 10

// Config configures a Server. The zero value of each field but Store and
// Rules means its default.
type Config struct {
	// Store keeps the state of every rule. Required.
	Store sluice.Store
	// Rules are the rules clients may name, with unique names, as
	// config.Parse returns them.
	Rules []config.Rule
	// Domains are the descriptor domains clients may name, as
	// config.Parse returns them. At least one rule or domain.
	Domains []config.Domain
	// Namespace prefixes every key the rules store, to share a store
	// with other applications. Default "sluice".
	Namespace string
	// Clock returns the time of each request. Default nil: the store's
	// own clock.
	Clock func() time.Time
	// Logger receives store failures. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; larger ones get 413. Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBatch bounds the checks of one batch. Default DefaultMaxBatch.
	MaxBatch int
	// Guard judges the key of every check of a named rule before its
	// limits, and counts their denials (see rules.Guard): a Service's
	// allow and deny lists and jails. Default nil: the limits alone
	// decide.
	Guard rules.Guard
}

// DefaultMaxBatch is the default bound on the checks of one batch.
const DefaultMaxBatch = 100

// A Pinger is a store that can tell whether it is reachable. Stores that
// implement it are pinged by GET /readyz; others are always ready.
type Pinger interface {
	Ping(ctx context.Context) error
}

// A Server is the HTTP API of sluice serve: an http.Handler with one
// sluice.Limiter per rule, all over one store. Create Servers with New;
// the zero value is not usable. A Server is safe for concurrent use.
type Server struct {
	store   sluice.Store
	rules   map[string]*rule
	names   string // the rule names, sorted, for error messages
	log     *slog.Logger
	maxBody int64
	mux     *http.ServeMux
	engine  *rules.Engine
	batch   int
}

// rule is a named policy as the server applies it.
type rule struct {
	name    string
	lim     *sluice.Limiter
	maxCost int // the smallest MaxBurst of the rule's limits
}

// New returns a Server for c. It builds every rule's limiter now, so an
// invalid rule is an error here rather than on the first request.
func New(c Config) (*Server, error) {
	if c.Store == nil {
		return nil, fmt.Errorf("server: %w: nil store", sluice.ErrInvalidRequest)
	}
	if len(c.Rules)+len(c.Domains) == 0 {
		return nil, fmt.Errorf("server: %w: no rules", sluice.ErrInvalidRequest)
	}
	s := &Server{
		store:   c.Store,
		rules:   make(map[string]*rule, len(c.Rules)),
		log:     c.Logger,
		maxBody: c.MaxBodyBytes,
		mux:     http.NewServeMux(),
		batch:   c.MaxBatch,
	}
	if s.batch <= 0 {
		s.batch = DefaultMaxBatch
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	for _, r := range c.Rules {
		if _, dup := s.rules[r.Name]; dup {
			return nil, fmt.Errorf("server: %w: rule %q defined twice", sluice.ErrInvalidRequest, r.Name)
		}
		lim, err := sluice.New(c.Store, sluice.Config{
			Limits:    r.Limits,
			Action:    r.Name,
			Namespace: c.Namespace,
			Clock:     c.Clock,
		})
		if err != nil {
			return nil, fmt.Errorf("server: rule %q: %w", r.Name, err)
		}
		ru := &rule{name: r.Name, lim: lim, maxCost: r.Limits[0].MaxBurst()}
		for _, l := range r.Limits {
			ru.maxCost = min(ru.maxCost, l.MaxBurst())
		}
		s.rules[r.Name] = ru
	}
	eng, err := rules.New(rules.Config{
		Store: c.Store, Rules: c.Rules, Domains: c.Domains,
		Namespace: c.Namespace, Clock: c.Clock, Logger: s.log, Guard: c.Guard,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.engine = eng
	s.names = strings.Join(eng.Names(), ", ")

	s.mux.HandleFunc("/v1/check", s.post(s.check))
	s.mux.HandleFunc("/v1/reset", s.post(s.reset))
	s.mux.HandleFunc("/healthz", s.get(s.healthz))
	s.mux.HandleFunc("/readyz", s.get(s.readyz))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no endpoint "+r.URL.Path+" (want /v1/check, /v1/reset, /healthz or /readyz)")
	})
	return s, nil
}

var _ http.Handler = (*Server)(nil)

// Engine returns the engine that decides the server's checks, for the
// other APIs of the service (Envoy's gRPC, forward-auth) to decide alike.
func (s *Server) Engine() *rules.Engine { return s.engine }

// ServeHTTP serves the API described in the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// An apiError is an error answer: a status and a message for the client.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// post adapts an API handler: POST with a JSON body only, errors written
// as JSON.
func (s *Server) post(h func(w http.ResponseWriter, r *http.Request) *apiError) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, r.Method+" not allowed: use POST")
			return
		}
		// Only JSON: a browser cannot send it cross-origin without a
		// preflight, so no web page can spend or reset a visitor's limits.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		if err := h(w, r); err != nil {
			writeError(w, err.status, err.msg)
		}
	}
}

// get adapts a probe handler: GET or HEAD only.
func (s *Server) get(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, r.Method+" not allowed: use GET")
			return
		}
		h(w, r)
	}
}

// rule finds the named rule, and checks that the request names a key.
func (s *Server) rule(name, key string) (*rule, *apiError) {
	switch ru := s.rules[name]; {
	case name == "":
		return nil, badRequest("rule is required (one of %s)", s.names)
	case ru == nil:
		return nil, badRequest("unknown rule %q (want one of %s)", name, s.names)
	case key == "":
		return nil, badRequest("key is required")
	default:
		return ru, nil
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.store.(Pinger); ok {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			s.log.WarnContext(r.Context(), "store not ready", "err", err)
			writeError(w, http.StatusServiceUnavailable, "store not ready")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// decode reads exactly one JSON object into v, refusing unknown fields
// and anything after the object.
func decode(body io.Reader, v any) *apiError {
	dec := json.NewDecoder(body)
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
		return nil
	case tooLarge(err):
		return &apiError{http.StatusRequestEntityTooLarge, err.Error()}
	case errors.Is(err, io.EOF):
		return badRequest("empty body: want a JSON object")
	}
	return badRequest("malformed request: %v", err)
}

func tooLarge(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// The client may be gone; there is no one to tell.
	_ = json.NewEncoder(w).Encode(v)
}
