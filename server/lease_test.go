package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/leasetest"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/wire"
	"github.com/sluicehq/sluice/wire/sluicepb"
)

const leaseRules = `
rules:
  - name: login
    limits: ["5/min"]
  - name: reports
    concurrency: {limit: 2, ttl: 1m, max_wait: 2s}
  - name: shared
    concurrency: {limit: 8, ttl: 10s, max_wait: 30s}
`

func leaseCall(t *testing.T, h http.Handler, path, body string) (int, wire.LeaseResponse, string) {
	t.Helper()
	w := do(t, h, http.MethodPost, path, body)
	var res wire.LeaseResponse
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
			t.Fatalf("%s %s: %v: %s", path, body, err, w.Body)
		}
	}
	return w.Code, res, w.Body.String()
}

// TestLeasesHTTP walks a concurrency rule of 2 through the HTTP API:
// grants, a refusal with retry_after, release, extend, and the errors.
func TestLeasesHTTP(t *testing.T) {
	s, _ := newService(t, leaseRules)
	h := s.Handler()
	var ids []string
	for i := range 2 {
		code, res, body := leaseCall(t, h, "/v1/acquire", `{"rule":"reports","key":"tenant-1","class":"critical"}`)
		if code != 200 || !res.OK || res.ID == "" || res.InUse != i+1 || res.Limit != 2 || res.Expires == nil {
			t.Fatalf("acquire %d: %d %s", i, code, body)
		}
		ids = append(ids, res.ID)
	}
	code, res, body := leaseCall(t, h, "/v1/acquire", `{"rule":"reports","key":"tenant-1","class":"critical"}`)
	if code != 200 || res.OK || res.ID != "" || res.RetryAfter <= 59 || res.RetryAfter > 60 {
		t.Errorf("third acquire: %d %s, want refused with retry_after about 60", code, body)
	}
	if code, res, body = leaseCall(t, h, "/v1/acquire", `{"rule":"reports","key":"tenant-2"}`); code != 200 || !res.OK {
		t.Errorf("acquire of another key: %d %s", code, body)
	}
	if code, res, body = leaseCall(t, h, "/v1/extend", `{"rule":"reports","key":"tenant-1","id":"`+ids[0]+`"}`); code != 200 || !res.OK || res.Expires == nil {
		t.Errorf("extend: %d %s", code, body)
	}
	if code, res, body = leaseCall(t, h, "/v1/release", `{"rule":"reports","key":"tenant-1","id":"`+ids[0]+`"}`); code != 200 || !res.OK || res.InUse != 1 {
		t.Errorf("release: %d %s", code, body)
	}
	if code, res, body = leaseCall(t, h, "/v1/release", `{"rule":"reports","key":"tenant-1","id":"`+ids[0]+`"}`); code != 200 || res.OK {
		t.Errorf("second release: %d %s, want ok false", code, body)
	}
	if code, res, body = leaseCall(t, h, "/v1/extend", `{"rule":"reports","key":"tenant-1","id":"`+ids[0]+`"}`); code != 200 || res.OK {
		t.Errorf("extend of a released lease: %d %s, want ok false", code, body)
	}
	for _, tt := range []struct{ path, body, want string }{
		{"/v1/acquire", `{"rule":"login","key":"k"}`, `unknown concurrency rule \"login\" (want one of reports, shared)`},
		{"/v1/acquire", `{"rule":"reports","key":"k","class":"vip"}`, `class \"vip\"`},
		{"/v1/acquire", `{"rule":"reports","key":"k","wait":-1}`, "wait -1"},
		{"/v1/acquire", `{"rule":"reports","key":"k","cost":2}`, "unknown field"},
		{"/v1/release", `{"rule":"reports","key":"k","id":""}`, "lease id of 0 bytes"},
		{"/v1/extend", `{"rule":"reports","key":"k","id":"` + strings.Repeat("x", 65) + `"}`, "lease id of 65 bytes"},
	} {
		if code, _, body := leaseCall(t, h, tt.path, tt.body); code != 400 || !strings.Contains(body, tt.want) {
			t.Errorf("%s %s: %d %s, want 400 with %q", tt.path, tt.body, code, body, tt.want)
		}
	}
	if w := do(t, h, http.MethodGet, "/v1/acquire", ""); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/acquire: %d, want 405", w.Code)
	}
	metrics := do(t, h, http.MethodGet, "/metrics", "").Body.String()
	for _, want := range []string{
		`sluice_concurrency_acquires_total{class="critical",result="granted",rule="reports"} 2`,
		`sluice_concurrency_acquires_total{class="critical",result="refused",rule="reports"} 1`,
		`sluice_concurrency_releases_total{rule="reports"} 1`,
		`sluice_concurrency_in_flight{rule="reports"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestLeasesWait: an acquire with a wait is granted when a holder
// releases, and one whose wait (capped by max_wait) ends is refused.
func TestLeasesWait(t *testing.T) {
	s, _ := newService(t, leaseRules)
	h := s.Handler()
	var ids []string
	for range 2 {
		_, res, _ := leaseCall(t, h, "/v1/acquire", `{"rule":"reports","key":"k","class":"critical"}`)
		ids = append(ids, res.ID)
	}
	start := time.Now()
	if code, res, body := leaseCall(t, h, "/v1/acquire", `{"rule":"reports","key":"k","class":"critical","wait":3600}`); code != 200 || res.OK {
		t.Errorf("acquire waiting past max_wait: %d %s, want refused", code, body)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Errorf("refused after %v, want the rule's max_wait, 2s", waited)
	}
	var wg sync.WaitGroup
	var got wire.LeaseResponse
	wg.Go(func() {
		_, got, _ = leaseCall(t, h, "/v1/acquire", `{"rule":"reports","key":"k","class":"critical","wait":2}`)
	})
	leaseCall(t, h, "/v1/release", `{"rule":"reports","key":"k","id":"`+ids[0]+`"}`)
	wg.Wait()
	if !got.OK {
		t.Errorf("waiting acquire when a holder released: %+v, want granted", got)
	}
}

// TestLeasesGRPC: the same calls over sluice.v1.Leases.
func TestLeasesGRPC(t *testing.T) {
	s, _ := newService(t, leaseRules)
	g := grpc.NewServer()
	s.LeasesService().Register(g)
	c := sluicepb.NewLeasesClient(rlstest.ServeGRPC(t, g))
	ctx := t.Context()
	a, err := c.Acquire(ctx, &sluicepb.AcquireRequest{Rule: "reports", Key: "k"})
	if err != nil || !a.Ok || a.Id == "" || a.InUse != 1 || a.Limit != 2 || a.Expires == nil {
		t.Fatalf("Acquire = %v, %v", a, err)
	}
	_, _ = c.Acquire(ctx, &sluicepb.AcquireRequest{Rule: "reports", Key: "k", Class: "critical"})
	r, err := c.Acquire(ctx, &sluicepb.AcquireRequest{Rule: "reports", Key: "k", Class: "critical", Wait: durationpb.New(10 * time.Millisecond)})
	if err != nil || r.Ok || r.RetryAfter.AsDuration() <= 0 {
		t.Errorf("Acquire over the limit = %v, %v; want refused with retry_after", r, err)
	}
	if e, err := c.Extend(ctx, &sluicepb.LeaseRef{Rule: "reports", Key: "k", Id: a.Id}); err != nil || !e.Ok {
		t.Errorf("Extend = %v, %v", e, err)
	}
	if rel, err := c.Release(ctx, &sluicepb.LeaseRef{Rule: "reports", Key: "k", Id: a.Id}); err != nil || !rel.Ok || rel.InUse != 1 {
		t.Errorf("Release = %v, %v", rel, err)
	}
	for _, req := range []*sluicepb.AcquireRequest{{Rule: "nope", Key: "k"}, {Rule: "reports", Key: "k", Class: "vip"}, {Rule: "reports", Wait: durationpb.New(-time.Second)}} {
		if _, err := c.Acquire(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("Acquire(%v) = %v, want INVALID_ARGUMENT", req, err)
		}
	}
}

// TestLeasesProcesses runs 4 OS processes × 64 goroutines acquiring,
// holding and releasing leases of one key through the service's HTTP API
// on the memory store (the service is what shares a memory store between
// processes): an observer outside the service never counts more than
// the limit, 8.
func TestLeasesProcesses(t *testing.T) {
	testserver.SkipShort(t, "4 processes × 64 goroutines")
	s, _ := newService(t, leaseRules)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	leasetest.Processes(t, "TestLeasesHolder", 4, leasetest.Params{Limit: 8, Goroutines: 64, Rounds: 4, TTL: 10 * time.Second},
		"SLUICE_LEASES_URL="+srv.URL)
}

// TestLeasesHolder is a holder process of TestLeasesProcesses; it does
// nothing when run on its own.
func TestLeasesHolder(t *testing.T) {
	p, ok, err := leasetest.FromEnv()
	if !ok {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	base := os.Getenv("SLUICE_LEASES_URL")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: p.Goroutines}}
	var wg sync.WaitGroup
	for range p.Goroutines {
		wg.Go(func() {
			if err := holdOverHTTP(client, base, p); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func holdOverHTTP(client *http.Client, base string, p leasetest.Params) error {
	a, err := leasetest.Dial(p.Addr)
	if err != nil {
		return err
	}
	defer a.Close()
	for range p.Rounds {
		var res wire.LeaseResponse
		for attempt := 0; !res.OK; attempt++ { // each acquire waits up to 30s (max_wait)
			if attempt == 4 {
				return fmt.Errorf("no place after 4 waits: %+v", res)
			}
			if res, err = post(client, base+"/v1/acquire", `{"rule":"shared","key":"one","class":"critical","wait":30}`); err != nil {
				return err
			}
		}
		if err := a.Granted(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond) // the work: long enough for holders to overlap
		if err := a.Releasing(); err != nil {
			return err
		}
		rel, err := post(client, base+"/v1/release", `{"rule":"shared","key":"one","id":"`+res.ID+`"}`)
		if err != nil || !rel.OK {
			return fmt.Errorf("release: %+v, %v", rel, err)
		}
	}
	return nil
}

func post(client *http.Client, url, body string) (wire.LeaseResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return wire.LeaseResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return wire.LeaseResponse{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var res wire.LeaseResponse
	if resp.StatusCode != 200 {
		return res, fmt.Errorf("%s: %d %s", url, resp.StatusCode, b)
	}
	return res, json.Unmarshal(b, &res)
}

// TestLeasesCrash kills (SIGKILL) a client process holding every place of
// a key through the service (memory store): the places stay taken just
// after, and come back when the 2 s leases expire.
func TestLeasesCrash(t *testing.T) {
	ms := memory.New(memory.Config{})
	defer ms.Close()
	c, err := config.Parse("test.yaml", []byte("rules:\n  - {name: login, limits: [5/min]}\n  - {name: crashy, concurrency: {limit: 4, ttl: 2s}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewService(context.Background(), c, Options{Store: ms, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	// The same keys as the service's rule: namespace "sluice", action "crashy".
	con, err := sluice.NewConcurrency(ms, sluice.ConcurrencyConfig{Limit: 4, TTL: 2 * time.Second, Action: "crashy", Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Crash(t, "TestLeasesCrashHolder", con, "one", leasetest.Params{Limit: 4, Goroutines: 1, Rounds: 1, TTL: 2 * time.Second},
		"SLUICE_LEASES_URL="+srv.URL)
}

// TestLeasesCrashHolder is the client process of TestLeasesCrash: it
// takes every place over HTTP, announces them, and waits to be killed.
func TestLeasesCrashHolder(t *testing.T) {
	p, ok, err := leasetest.FromEnv()
	if !ok {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	a, err := leasetest.Dial(p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for range p.Limit {
		res, err := post(http.DefaultClient, os.Getenv("SLUICE_LEASES_URL")+"/v1/acquire", `{"rule":"crashy","key":"one","class":"critical"}`)
		if err != nil || !res.OK {
			t.Fatalf("acquire: %+v, %v", res, err)
		}
		if err := a.Granted(); err != nil {
			t.Fatal(err)
		}
	}
	select {} // until SIGKILL
}
