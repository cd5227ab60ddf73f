package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/wire"
)

// DefaultMaxBodyBytes is the default bound on a request body: far more
// than any valid request needs, little enough that no client can make the
// server buffer much.
const DefaultMaxBodyBytes = 64 << 10

// Config configures a Handler. The zero value of each field but Engine
// means its default.
type Config struct {
	// Engine decides every check and reset: its rules, store, guard and
	// clock are the API's. Required.
	Engine *rules.Engine
	// Logger receives store failures. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; larger ones get 413. Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBatch bounds the checks of one batch. Default wire.MaxBatch.
	MaxBatch int
	// Logins are the login rules of /v1/login/*, by name. Default none.
	Logins map[string]*guard.Login
}

// A Handler is the HTTP JSON API of sluice serve, over one rules engine.
// Create Handlers with New; the zero value is not usable. A Handler is
// safe for concurrent use.
type Handler struct {
	engine  *rules.Engine
	names   string // the rule and domain names, sorted, for error messages
	log     *slog.Logger
	maxBody int64
	batch   int
	logins  map[string]*guard.Login
	mux     *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// New returns the Handler of c.
func New(c Config) (*Handler, error) {
	if c.Engine == nil {
		return nil, fmt.Errorf("httpapi: %w: no engine", sluice.ErrInvalidRequest)
	}
	h := &Handler{
		engine:  c.Engine,
		names:   strings.Join(c.Engine.Names(), ", "),
		log:     c.Logger,
		maxBody: c.MaxBodyBytes,
		batch:   c.MaxBatch,
		logins:  c.Logins,
		mux:     http.NewServeMux(),
	}
	if h.batch <= 0 {
		h.batch = wire.MaxBatch
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	h.mux.HandleFunc("/v1/check", h.post(h.check))
	h.mux.HandleFunc("/v1/reset", h.post(h.reset))
	h.mux.HandleFunc("/v1/insert", h.post(h.insert))
	h.mux.HandleFunc("/v1/reserve", h.post(h.outcome(h.reserve)))
	h.mux.HandleFunc("/v1/commit", h.post(h.outcome(h.commit)))
	h.mux.HandleFunc("/v1/refund", h.post(h.outcome(h.refund)))
	h.mux.HandleFunc("/v1/report", h.post(h.outcome(h.report)))
	h.mux.HandleFunc("/v1/login/begin", h.post(h.loginBegin))
	h.mux.HandleFunc("/v1/login/fail", h.post(h.loginSettle((*guard.Login).Fail)))
	h.mux.HandleFunc("/v1/login/succeed", h.post(h.loginSettle((*guard.Login).Succeed)))
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.Error(w, http.StatusNotFound, "no endpoint "+r.URL.Path+" (want /v1/check, /v1/reset, /v1/insert, /v1/reserve, /v1/commit, /v1/refund, /v1/report or /v1/login/{begin,fail,succeed})")
	})
	return h, nil
}

// ServeHTTP serves the API described in the package documentation.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
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
func (h *Handler) post(serve func(w http.ResponseWriter, r *http.Request) *apiError) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !jsonhttp.RequirePost(w, r) {
			return
		}
		if err := serve(w, r); err != nil {
			jsonhttp.Error(w, err.status, err.msg)
		}
	}
}

// decode reads the request's body into v.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	if status, err := jsonhttp.Decode(w, r, h.maxBody, v); err != nil {
		return &apiError{status, err.Error()}
	}
	return nil
}
