package leaseapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/leasetest"
	"github.com/sluicehq/sluice/server/leaseapi"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/wire"
	"github.com/sluicehq/sluice/wire/sluicepb"
)

// rules are the concurrency rules of the tests: reports of 2 per key,
// exports of 4.
var rules = []config.ConcurrencyRule{
	{Name: "reports", Limit: 2, TTL: time.Minute, MaxWait: 50 * time.Millisecond},
	{Name: "exports", Limit: 4, TTL: time.Minute},
}

// newLeases returns the Leases of rules on store (a memory store when
// nil).
func newLeases(t *testing.T, store sluice.LeaseStore) *leaseapi.Leases {
	t.Helper()
	if store == nil {
		ms := memory.New(memory.Config{})
		t.Cleanup(func() { ms.Close() })
		store = ms
	}
	l, err := leaseapi.New(leaseapi.Config{Store: store, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// newHandler returns the HTTP API of l.
func newHandler(l *leaseapi.Leases, log *slog.Logger) http.Handler {
	return leaseapi.Handler(func() *leaseapi.Leases { return l }, log)
}

// A transport makes the three calls over one of the APIs, answering a
// wire.LeaseResponse, or the HTTP status (or the gRPC code's HTTP twin) of an
// error.
type transport interface {
	acquire(t *testing.T, rule, key, class string) (wire.LeaseResponse, int)
	call(t *testing.T, op, rule, key, id string) (wire.LeaseResponse, int)
}

// httpTransport calls the HTTP handler.
type httpTransport struct{ h http.Handler }

func (c httpTransport) post(t *testing.T, path string, body any) (wire.LeaseResponse, int) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	w := serve(c.h, http.MethodPost, path, "application/json", string(b))
	var res wire.LeaseResponse
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
			t.Fatalf("%s %s: %v: %s", path, b, err, w.Body)
		}
	}
	return res, w.Code
}

func (c httpTransport) acquire(t *testing.T, rule, key, class string) (wire.LeaseResponse, int) {
	return c.post(t, "/v1/acquire", wire.AcquireRequest{Rule: rule, Key: key, Class: class})
}

func (c httpTransport) call(t *testing.T, op, rule, key, id string) (wire.LeaseResponse, int) {
	return c.post(t, "/v1/"+op, wire.LeaseRef{Rule: rule, Key: key, ID: id})
}

func serve(h http.Handler, method, path, contentType, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// grpcTransport calls the gRPC service through an in-memory listener.
type grpcTransport struct{ c sluicepb.LeasesClient }

func newGRPC(t *testing.T, l *leaseapi.Leases) grpcTransport {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	leaseapi.NewGRPC(func() *leaseapi.Leases { return l }).Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return grpcTransport{sluicepb.NewLeasesClient(conn)}
}

func (c grpcTransport) answer(res *sluicepb.LeaseResponse, err error) (wire.LeaseResponse, int) {
	switch status.Code(err) {
	case codes.OK:
	case codes.InvalidArgument:
		return wire.LeaseResponse{}, http.StatusBadRequest
	default:
		return wire.LeaseResponse{}, http.StatusServiceUnavailable
	}
	out := wire.LeaseResponse{OK: res.GetOk(), Rule: res.GetRule(), ID: res.GetId(), InUse: int(res.GetInUse()), Limit: int(res.GetLimit()),
		RetryAfter: res.GetRetryAfter().AsDuration().Seconds()}
	if res.GetExpires() != nil {
		e := res.GetExpires().AsTime()
		out.Expires = &e
	}
	return out, http.StatusOK
}

func (c grpcTransport) acquire(t *testing.T, rule, key, class string) (wire.LeaseResponse, int) {
	return c.answer(c.c.Acquire(t.Context(), &sluicepb.AcquireRequest{Rule: rule, Key: key, Class: class}))
}

func (c grpcTransport) call(t *testing.T, op, rule, key, id string) (wire.LeaseResponse, int) {
	ref := &sluicepb.LeaseRef{Rule: rule, Key: key, Id: id}
	if op == "release" {
		return c.answer(c.c.Release(t.Context(), ref))
	}
	return c.answer(c.c.Extend(t.Context(), ref))
}

// transports runs f over HTTP and gRPC, each on Leases of its own.
func transports(t *testing.T, store func(t *testing.T) sluice.LeaseStore, f func(t *testing.T, c transport)) {
	t.Run("http", func(t *testing.T) {
		f(t, httpTransport{newHandler(newLeases(t, store(t)), slog.New(slog.DiscardHandler))})
	})
	t.Run("grpc", func(t *testing.T) { f(t, newGRPC(t, newLeases(t, store(t)))) })
}

func memoryStore(*testing.T) sluice.LeaseStore { return nil }

// TestCalls walks a rule of 2 through both APIs: two grants, a refusal
// with a retry after, an extension, a release, and a release and an
// extension of the released lease, which find nothing.
func TestCalls(t *testing.T) {
	transports(t, memoryStore, func(t *testing.T, c transport) {
		var ids []string
		for i := range 2 {
			res, code := c.acquire(t, "reports", "tenant-1", "critical")
			if code != 200 || !res.OK || res.ID == "" || res.InUse != i+1 || res.Limit != 2 || res.Expires == nil || res.Rule != "reports" {
				t.Fatalf("acquire %d = %d %+v", i, code, res)
			}
			ids = append(ids, res.ID)
		}
		if res, code := c.acquire(t, "reports", "tenant-1", ""); code != 200 || res.OK || res.ID != "" || res.RetryAfter < 59 || res.RetryAfter > 60 {
			t.Errorf("acquire over the limit = %d %+v; want refused, retry after about 60s", code, res)
		}
		for _, tt := range []struct {
			op    string
			ok    bool
			inUse int
		}{{"extend", true, 2}, {"release", true, 1}, {"release", false, 1}, {"extend", false, 1}} {
			res, code := c.call(t, tt.op, "reports", "tenant-1", ids[0])
			if code != 200 || res.OK != tt.ok || res.InUse != tt.inUse || res.Limit != 2 {
				t.Errorf("%s = %d %+v; want ok %v, %d in use", tt.op, code, res, tt.ok, tt.inUse)
			}
		}
	})
}

// TestForgedIDs: a client that holds one lease, and knows its ID, tries
// forgeries of it (its neighbours, random IDs of every length and
// alphabet), its ID on another key and another rule, and its ID once
// released: nothing is released or extended (a clear 400 for an ID of
// invalid length), and the other holders' leases stay in use.
func TestForgedIDs(t *testing.T) {
	transports(t, memoryStore, func(t *testing.T, c transport) {
		var ids []string
		for range 3 {
			res, _ := c.acquire(t, "exports", "tenant-1", "critical")
			ids = append(ids, res.ID)
		}
		c.acquire(t, "exports", "tenant-2", "critical")
		c.acquire(t, "reports", "tenant-1", "critical")
		mine := ids[1] // granted between two others
		for _, f := range leasetest.Forgeries(mine) {
			if _, ok := c.(grpcTransport); ok && !utf8.ValidString(f) {
				continue // a proto3 string is UTF-8: the client cannot send it
			}
			for _, op := range []string{"release", "extend"} {
				// Over HTTP, JSON turns invalid UTF-8 into U+FFFD, which may
				// make the ID too long: a 400 is a refusal too.
				res, code := c.call(t, op, "exports", "tenant-1", f)
				invalid := len(f) == 0 || len(f) > sluice.MaxLeaseIDLen
				if code != 400 && (invalid || code != 200 || res.OK || res.InUse != 3) {
					t.Fatalf("%s of %q = %d %+v; want refused (400 for an invalid ID), 3 in use", op, f, code, res)
				}
			}
		}
		for _, tt := range []struct {
			rule, key string
			inUse     int
		}{{"exports", "tenant-2", 1}, {"reports", "tenant-1", 1}, {"exports", "Tenant-1", 0}} {
			for _, op := range []string{"release", "extend"} {
				if res, code := c.call(t, op, tt.rule, tt.key, mine); code != 200 || res.OK || res.InUse != tt.inUse || res.ID != "" {
					t.Errorf("%s of a lease of exports/tenant-1 as %s/%s = %d %+v; want refused, %d in use", op, tt.rule, tt.key, code, res, tt.inUse)
				}
			}
		}
		if res, code := c.call(t, "release", "exports", "tenant-1", mine); code != 200 || !res.OK || res.InUse != 2 {
			t.Fatalf("release by the holder = %d %+v", code, res)
		}
		for _, op := range []string{"release", "extend"} {
			if res, code := c.call(t, op, "exports", "tenant-1", mine); code != 200 || res.OK || res.InUse != 2 {
				t.Errorf("replayed %s of a released ID = %d %+v; want refused, 2 in use", op, code, res)
			}
		}
		for i, id := range []string{ids[0], ids[2]} {
			if res, code := c.call(t, "release", "exports", "tenant-1", id); code != 200 || !res.OK || res.InUse != 1-i {
				t.Errorf("release by another holder = %d %+v", code, res)
			}
		}
	})
}

// TestBadRequests: malformed calls are 400 (INVALID_ARGUMENT) with
// nothing granted, over both APIs.
func TestBadRequests(t *testing.T) {
	transports(t, memoryStore, func(t *testing.T, c transport) {
		for _, tt := range []struct{ rule, class string }{{"nope", ""}, {"", ""}, {"reports", "vip"}} {
			if res, code := c.acquire(t, tt.rule, "k", tt.class); code != 400 {
				t.Errorf("acquire of rule %q, class %q = %d %+v; want 400", tt.rule, tt.class, code, res)
			}
		}
		for _, op := range []string{"release", "extend"} {
			for _, tt := range []struct{ rule, id string }{{"nope", "x"}, {"reports", ""}, {"reports", strings.Repeat("x", sluice.MaxLeaseIDLen+1)}} {
				if res, code := c.call(t, op, tt.rule, "k", tt.id); code != 400 {
					t.Errorf("%s of rule %q, ID of %d bytes = %d %+v; want 400", op, tt.rule, len(tt.id), code, res)
				}
			}
		}
	})
}

// TestHTTPErrors: the HTTP API's own errors, as problem details.
func TestHTTPErrors(t *testing.T) {
	h := newHandler(newLeases(t, nil), slog.New(slog.DiscardHandler))
	for _, tt := range []struct {
		method, path, contentType, body string
		code                            int
		want                            string
	}{
		{"GET", "/v1/acquire", "", "", 405, "use POST"},
		{"POST", "/v1/acquire", "text/plain", `{"rule":"reports","key":"k"}`, 415, "application/json"},
		{"POST", "/v1/acquire", "application/json", `{"rule":"reports","key":"k","cost":2}`, 400, "unknown field"},
		{"POST", "/v1/acquire", "application/json", `{"rule":"reports","key":"k"}{}`, 400, ""},
		{"POST", "/v1/acquire", "application/json", `{"rule":"reports","key":"k","wait":-1}`, 400, "wait -1"},
		{"POST", "/v1/acquire", "application/json", `{"rule":"reports","key":"k","wait":1e300}`, 400, "wait"},
		{"POST", "/v1/acquire", "application/json", `{"rule":"nope","key":"k"}`, 400, `unknown concurrency rule \"nope\" (want one of exports, reports)`},
		{"POST", "/v1/release", "application/json", `{"rule":"reports","key":"k","id":""}`, 400, "lease id of 0 bytes"},
		{"POST", "/v1/release", "application/json", `{"rule":"reports","key":"k","id":7}`, 400, ""},
		{"POST", "/v1/release", "application/json", strings.Repeat(" ", 17<<10) + `{}`, 413, ""},
	} {
		w := serve(h, tt.method, tt.path, tt.contentType, tt.body)
		if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.want) || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s %.40q = %d %s %s; want %d with %q", tt.method, tt.path, tt.body, w.Code, w.Header().Get("Content-Type"), w.Body, tt.code, tt.want)
		}
	}
}

// failing is a LeaseStore whose every call fails.
type failing struct{}

func (failing) Acquire(context.Context, sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return sluice.LeaseDecision{}, fmt.Errorf("%w: down", sluice.ErrStore)
}

func (failing) Release(context.Context, sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return sluice.LeaseDecision{}, fmt.Errorf("%w: down", sluice.ErrStore)
}

func (failing) Extend(context.Context, sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return sluice.LeaseDecision{}, fmt.Errorf("%w: down", sluice.ErrStore)
}

// TestStoreFails: a store that fails is 503 (UNAVAILABLE) on every call,
// never a grant; the HTTP answer does not leak the store's error.
func TestStoreFails(t *testing.T) {
	transports(t, func(*testing.T) sluice.LeaseStore { return failing{} }, func(t *testing.T, c transport) {
		if res, code := c.acquire(t, "reports", "k", ""); code != 503 || res.OK {
			t.Errorf("acquire = %d %+v, want 503", code, res)
		}
		for _, op := range []string{"release", "extend"} {
			if res, code := c.call(t, op, "reports", "k", "q3Jc9vW1xZt0LmN8bY4aKg"); code != 503 || res.OK {
				t.Errorf("%s = %d %+v, want 503", op, code, res)
			}
		}
	})
	var logs bytes.Buffer
	h := newHandler(newLeases(t, failing{}), slog.New(slog.NewTextHandler(&logs, nil)))
	w := serve(h, "POST", "/v1/acquire", "application/json", `{"rule":"reports","key":"k"}`)
	if body, _ := io.ReadAll(w.Body); strings.Contains(string(body), "down") || !strings.Contains(logs.String(), "down") {
		t.Errorf("503 body %s, log %s: want the store's error logged, not answered", body, logs.String())
	}
}

// TestWait: an acquire that waits is refused when the rule's max_wait
// (shorter than the request's wait) ends with no place free.
func TestWait(t *testing.T) {
	l := newLeases(t, nil)
	for range 2 {
		if res, err := l.Acquire(t.Context(), leaseapi.AcquireRequest{Rule: "reports", Key: "k"}); err != nil || !res.OK {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
	}
	res, err := l.Acquire(t.Context(), leaseapi.AcquireRequest{Rule: "reports", Key: "k", Wait: time.Hour})
	if err != nil || res.OK {
		t.Errorf("Acquire waiting at most max_wait = %+v, %v; want refused", res, err)
	}
	if _, err := newGRPC(t, l).c.Acquire(t.Context(), &sluicepb.AcquireRequest{Rule: "reports", Key: "k", Wait: durationpb.New(-time.Second)}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC Acquire with a negative wait: %v, want INVALID_ARGUMENT", err)
	}
}

// TestGuard: the guard judges the key of each acquire before its rule:
// an allow-listed key gets a free lease, which counts nothing and whose
// release and extend succeed; a denied key, none, with no wait; a banned
// key, none, with the ban's time left. Releases are not judged.
func TestGuard(t *testing.T) {
	var allow, deny guard.List
	allow.AddKey("ci-runner")
	deny.AddPrefix(netip.MustParsePrefix("198.51.100.0/24"))
	j, err := guard.NewJail(memory.New(memory.Config{}), guard.JailConfig{Name: "manual"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Ban(t.Context(), "tenant-bad", time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	ms := memory.New(memory.Config{})
	t.Cleanup(func() { ms.Close() })
	l, err := leaseapi.New(leaseapi.Config{Store: ms, Rules: rules,
		Guard: guard.NewGuard(guard.GuardConfig{Allow: &allow, Deny: &deny, Jails: []*guard.Jail{j}})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for range 3 { // more than the rule's 2: an exempt key counts nothing
		res, err := l.Acquire(ctx, leaseapi.AcquireRequest{Rule: "reports", Key: "ci-runner"})
		if err != nil || !res.OK || res.Guard != guard.Exempt || res.ID == "" || res.InUse != 0 {
			t.Fatalf("exempt Acquire = %+v, %v; want a free lease", res, err)
		}
		for _, call := range []func(context.Context, string, string, string) (leaseapi.Result, error){l.Release, l.Extend} {
			if r, err := call(ctx, "reports", "ci-runner", res.ID); err != nil || !r.OK {
				t.Errorf("release or extend of a free lease = %+v, %v; want ok", r, err)
			}
		}
	}
	for _, tt := range []struct {
		key  string
		want guard.Action
	}{{"198.51.100.7", guard.Refuse}, {"tenant-bad", guard.Banned}} {
		res, err := l.Acquire(ctx, leaseapi.AcquireRequest{Rule: "reports", Key: tt.key})
		if err != nil || res.OK || res.Guard != tt.want || res.ID != "" || (res.RetryAfter > 0) != (tt.want == guard.Banned) {
			t.Errorf("Acquire(%s) = %+v, %v; want refused by %v", tt.key, res, err, tt.want)
		}
	}
}

// TestFailurePolicy: when the store fails, each rule does as its policy
// says: closed answers the error; open grants a free lease; local grants
// leases of the local store, up to the rule's limit, which release and
// extend find there.
func TestFailurePolicy(t *testing.T) {
	local := memory.New(memory.Config{})
	t.Cleanup(func() { local.Close() })
	policies := map[string]sluice.FailurePolicy{"reports": sluice.FailLocal, "exports": sluice.FailOpen}
	l, err := leaseapi.New(leaseapi.Config{Store: failing{}, Rules: append(rules, config.ConcurrencyRule{Name: "audits", Limit: 1, TTL: time.Minute}),
		Policy: func(r string) sluice.FailurePolicy {
			if p, ok := policies[r]; ok {
				return p
			}
			return sluice.FailClosed
		}, Local: local, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if res, err := l.Acquire(ctx, leaseapi.AcquireRequest{Rule: "audits", Key: "k"}); !errors.Is(err, sluice.ErrStore) || res.OK {
		t.Errorf("closed: Acquire = %+v, %v; want the store's error", res, err)
	}
	if res, err := l.Acquire(ctx, leaseapi.AcquireRequest{Rule: "exports", Key: "k"}); err != nil || !res.OK || res.ID == "" {
		t.Errorf("open: Acquire = %+v, %v; want a free lease", res, err)
	}
	var ids []string
	for i := range 3 {
		res, err := l.Acquire(ctx, leaseapi.AcquireRequest{Rule: "reports", Key: "k"})
		if err != nil || res.OK != (i < 2) {
			t.Fatalf("local: Acquire %d = %+v, %v; want the local store's 2", i, res, err)
		}
		if res.OK {
			ids = append(ids, res.ID)
		}
	}
	if res, err := l.Extend(ctx, "reports", "k", ids[0]); err != nil || !res.OK {
		t.Errorf("local: Extend = %+v, %v; want renewed in the local store", res, err)
	}
	if res, err := l.Release(ctx, "reports", "k", ids[0]); err != nil || !res.OK || res.InUse != 1 {
		t.Errorf("local: Release = %+v, %v; want released in the local store, 1 left", res, err)
	}
	if res, err := l.Release(ctx, "reports", "k", "local~"+ids[1][len("local~"):]+"x"); err != nil || res.OK {
		t.Errorf("local: Release of a forged id = %+v, %v; want nothing released", res, err)
	}
}
