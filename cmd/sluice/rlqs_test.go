package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/rlqstest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/server/rlqs"
)

// rlqsLong runs the fleet tests in the long form: reports every
// second and demand changing every 10 s (about a minute and a half),
// instead of every 200 ms and 2 s.
var rlqsLong = flag.Bool("rlqs.long", false, "run the RLQS fleet tests at a 1s report interval with demand changing every 10s")

// A replica is a sluice serve process of the fleet tests.
type replica struct {
	cmd  *exec.Cmd
	grpc string
	done chan struct{}
	log  *strings.Builder
	mu   *sync.Mutex
}

// startReplica runs this test binary as "sluice serve -config cfg" (see
// TestMain) with a gRPC listener, until the test ends or it is killed.
func startReplica(t testing.TB, cfg string) *replica {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{done: make(chan struct{}), log: &strings.Builder{}, mu: &sync.Mutex{}}
	r.cmd = exec.Command(self, "serve", "-config", cfg, "-listen", "127.0.0.1:0", "-grpc-listen", "127.0.0.1:0", "-watch=false")
	r.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.log.Write(p)
	})
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "sluice: grpc on "); ok {
				addr <- v
			}
		}
	}()
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			r.cmd.Process.Kill()
			t.Errorf("a replica did not stop within 15s")
		}
	})
	select {
	case r.grpc = <-addr:
	case <-r.done:
		t.Fatalf("sluice serve ended before listening: %s", r.logText())
	case <-time.After(15 * time.Second):
		t.Fatalf("sluice serve did not announce its gRPC listener: %s", r.logText())
	}
	return r
}

func (r *replica) logText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

// kill ends the replica at once, as a crash would.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// fleetTiming is the report interval, TTL and time between demand
// changes of a fleet test.
type fleetTiming struct {
	report, ttl, phase time.Duration
}

func timing(t *testing.T) fleetTiming {
	testserver.SkipShort(t, "a fleet of RLQS clients and two replicas")
	if *rlqsLong {
		return fleetTiming{report: time.Second, ttl: 3 * time.Second, phase: 10 * time.Second}
	}
	return fleetTiming{report: 200 * time.Millisecond, ttl: time.Second, phase: 2 * time.Second}
}

// fleet starts one Redis, two replicas on it dividing a rule of limit
// per second, and eight Envoy-like clients, the first four streaming to
// replica 0 (then 1), the others to replica 1 (then 0), each named by
// rlqs.ClientHeader.
func fleet(t *testing.T, ft fleetTiming, limit int) ([]*replica, []*rlqstest.Client) {
	t.Helper()
	redis := testserver.StartRedis(t)
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, cfg, fmt.Sprintf(`store: {type: redis, redis: {addrs: [%q]}}
rules:
  - name: api
    limits: ["%d/s"]
quota:
  report_interval: %v
  ttl: %v
  buckets:
    - {domain: edge, rule: api}
`, redis.Addr, limit, ft.report, ft.ttl))
	reps := []*replica{startReplica(t, cfg), startReplica(t, cfg)}
	var clients []*rlqstest.Client
	for i := range 8 {
		targets := []string{reps[0].grpc, reps[1].grpc}
		if i >= 4 {
			targets[0], targets[1] = targets[1], targets[0]
		}
		c, err := rlqstest.New(rlqstest.Config{Targets: targets, Domain: "edge", Interval: ft.report,
			NoAssignment: &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}},
			Metadata:     map[string]string{rlqs.ClientHeader: fmt.Sprint("edge-", i)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		clients = append(clients, c)
	}
	return reps, clients
}

// bound is the most the fleet may admit beyond the limit in a window w
// (docs/service.md, "The bound"): every new strategy starts a full token
// bucket of burst/period of its share, at most one per report of each
// client and one at its subscription, and the shares sum to at most the
// limit; plus what a replaced share admits until its edge receives the
// replacement, taken here as 10 ms.
func bound(limit, clients int, burst, report, w time.Duration) float64 {
	changes := 1 + math.Ceil(float64(w)/float64(report))
	perChange := float64(limit)*burst.Seconds() + float64(2*clients) // a bucket's ceiling, and its floor of 2
	return perChange*changes + float64(limit)*0.010
}

// fairLimit is what the edges' fair shares divide of limit: the limit
// less the reserve kept for newcomers (config.DefaultQuotaReserve).
func fairLimit(limit int) float64 {
	return float64(limit) - math.Ceil(float64(limit)*config.DefaultQuotaReserve)
}

// skewed is the demand of the accuracy target: client i offers
// unit×(1 + (i+phase) mod 8) a second, the phase moving every period, so
// that the demands stay 1:2:…:8 and each client's changes at every phase;
// client 0 goes idle from idleAt on.
func skewed(unit float64, period, idleAt time.Duration) rlqstest.Demand {
	return func(i int, t time.Duration) float64 {
		if i == 0 && t >= idleAt {
			return 0
		}
		phase := int(t / period)
		return unit * float64(1+(i+phase)%8)
	}
}

// TestRLQSFleet runs the accuracy target: 8 Envoy-like clients of demand
// skewed 1:2:…:8 and changing every phase, on 2 replicas on one Redis
// dividing 1,000/s. The fleet's admissions over any second stay within
// the limit and the documented bound; two report intervals after each
// change every client admits within 10% of its max-min fair share; a
// client that goes idle gives its share back within one TTL.
func TestRLQSFleet(t *testing.T) {
	ft := timing(t)
	const limit, unit = 1000, 50.0
	_, clients := fleet(t, ft, limit)
	phases := 4
	idleAt := time.Duration(phases) * ft.phase
	total := idleAt + ft.phase
	demand := skewed(unit, ft.phase, idleAt)
	rec := rlqstest.Drive(t.Context(), clients, map[string]string{"name": "api"}, demand, total)

	most, at := rec.MaxWindow(time.Second, 0, total)
	b := bound(limit, len(clients), ft.report/10, ft.report, time.Second)
	t.Logf("most admitted in a second: %d at %v (limit %d, bound %.0f)", most, at.Round(time.Millisecond), limit, b)
	if float64(most) > limit+b {
		t.Errorf("the fleet admitted %d in the second from %v: over the limit %d plus the bound %.0f", most, at, limit, b)
	}
	checkFair(t, clients, rec, demand, fairLimit(limit), phases+1, ft)
	idleShareBack(t, clients[0], rec.Start.Add(idleAt), ft)
	if t.Failed() {
		dump(t, clients, rec, total)
	}
}

// checkFair checks that in each phase, from two report intervals after
// its change to its end, every client was assigned, and admitted, within
// 10% of its max-min fair share (see checkFairFrom).
func checkFair(t *testing.T, clients []*rlqstest.Client, rec *rlqstest.Record, demand rlqstest.Demand, limit float64, phases int, ft fleetTiming) {
	t.Helper()
	for p := range phases {
		checkFairFrom(t, clients, rec, demand, limit, time.Duration(p)*ft.phase, time.Duration(p+1)*ft.phase, ft)
	}
}

// checkFairFrom checks that from two report intervals after change to
// end every client was assigned within 10% of its max-min fair share of
// the demands the clients reported (checkShares), and admitted within
// 10% of its fair share of what they offered, and reports the worst
// deviations. What a client admits is judged only while the load
// generator kept up: one that offered a client less than 80% of its
// demand over a report interval (a machine too busy to run it on time)
// also admitted less than its share allows; the shares assigned are
// judged always, as they follow what the clients did report.
func checkFairFrom(t *testing.T, clients []*rlqstest.Client, rec *rlqstest.Record, demand rlqstest.Demand, limit float64, change, end time.Duration, ft fleetTiming) {
	t.Helper()
	from := change + 2*ft.report
	checkShares(t, clients, rec, limit, from, end, ft)
	for i := range rec.Admitted {
		d := demand(i, from)
		for f := from - ft.report; f < end && d > 0; f += ft.report {
			if rec.OfferedRate(i, f, f+ft.report) < 0.8*d {
				t.Logf("from %v to %v, admissions not judged: the load generator fell behind (client %d)", from, end, i)
				return
			}
		}
	}
	// The fair shares of the demands the clients did offer (each within
	// 80% of its nominal one, above): a generator a little late on a busy
	// machine lowers its client's demand, and the allocator rightly
	// gives the others more.
	offered := make([]float64, len(rec.Offered))
	for i := range offered {
		offered[i] = rec.OfferedRate(i, from-ft.report, end)
	}
	fair := rlqstest.FairShares(offered, limit)
	worst := 0.0
	for i := range offered {
		if fair[i] == 0 {
			continue
		}
		got := rec.Rate(i, from, end)
		dev := math.Abs(got-fair[i]) / fair[i]
		worst = math.Max(worst, dev)
		if dev > 0.10 {
			t.Errorf("from %v to %v, client %d (offered %.1f/s): admitted %.1f/s, fair share %.1f/s (%.1f%% off)", from, end, i, offered[i], got, fair[i], 100*dev)
		}
	}
	t.Logf("from %v to %v: worst deviation of the admitted from the fair share %.1f%%", from, end, 100*worst)
}

// checkShares checks that over [from, end) the shares each client was
// assigned sum to within 10% of its max-min fair shares of the demands
// the clients reported: at each of its reports, the fair share of the
// demands of every client as the service measured them from their
// reports so far (measuredDemands), against the share that answered it.
// A report is judged when every client's measured demand was steady
// (within 10%) over the two report intervals before it: a share may
// grow only as the others shrink, at their next reports. This holds
// whether or not the load generators kept up: it judges the allocator
// on what the clients said, and a generator that lags steadily still
// says it steadily.
func checkShares(t *testing.T, clients []*rlqstest.Client, rec *rlqstest.Record, limit float64, from, end time.Duration, ft fleetTiming) {
	t.Helper()
	logs := make([]rlqstest.Log, len(clients))
	demands := make([][]measured, len(clients))
	for i, c := range clients {
		logs[i] = c.Log()
		demands[i] = measuredDemands(logs[i], ft.report, limit)
	}
	worst, judged := 0.0, 0
	ds := make([]float64, len(clients))
	for i := range clients {
		got, want := 0.0, 0.0
		for _, m := range demands[i] {
			if at := m.at.Sub(rec.Start); at < from || at >= end || !steady(demands, m.at.Add(-2*ft.report), m.at) {
				continue
			}
			for j := range ds {
				ds[j] = demandAt(demands[j], m.at)
			}
			want += rlqstest.FairShares(ds, limit)[i]
			got += float64(shareAt(logs[i], m.at))
		}
		if want < 1 {
			continue
		}
		judged++
		dev := math.Abs(got-want) / want
		worst = math.Max(worst, dev)
		if dev > 0.10 {
			t.Errorf("from %v to %v, client %d: assigned %.0f in all at its reports, its fair shares of the demands reported %.0f (%.1f%% off)", from, end, i, got, want, 100*dev)
		}
	}
	t.Logf("from %v to %v: worst deviation of the shares assigned from the fair shares of the demands reported %.1f%% (%d clients judged)", from, end, 100*worst, judged)
}

// A measured demand is the demand the service holds for a client from
// its report at a time on.
type measured struct {
	at     time.Time
	demand float64
}

// measuredDemands returns the demand the service measured for a client
// (of its one bucket) at each of its reports, as rlqs measures it: the
// first report's is unknown (the whole limit); then the requests
// reported, allowed or denied, over the time since the measure began,
// plus 2/s, once that time spans three quarters of a report interval
// (until then, the demand stays).
func measuredDemands(l rlqstest.Log, report time.Duration, limit float64) []measured {
	var out []measured
	var since time.Time
	n, d := 0.0, limit
	for _, s := range l.Sent {
		for _, u := range s.Report.GetBucketQuotaUsages() {
			n += float64(u.GetNumRequestsAllowed() + u.GetNumRequestsDenied())
		}
		switch el := s.At.Sub(since); {
		case since.IsZero():
			since, n = s.At, 0
		case el >= report*3/4:
			d, since, n = n/el.Seconds()+2, s.At, 0
		}
		out = append(out, measured{at: s.At, demand: d})
	}
	return out
}

// steady reports whether every client's measured demand stayed within
// 10% over [from, to].
func steady(demands [][]measured, from, to time.Time) bool {
	for _, ms := range demands {
		lo, hi := demandAt(ms, from), demandAt(ms, from)
		for _, m := range ms {
			if m.at.After(from) && !m.at.After(to) {
				lo, hi = min(lo, m.demand), max(hi, m.demand)
			}
		}
		if hi > 1.1*lo {
			return false
		}
	}
	return true
}

// demandAt returns the demand of ms at t: the latest measured at or
// before t, 0 before the first.
func demandAt(ms []measured, t time.Time) float64 {
	d := 0.0
	for _, m := range ms {
		if m.at.After(t) {
			break
		}
		d = m.demand
	}
	return d
}

// shareAt returns the share that answered a client's report at x: the
// rate of the first action it received at or after x, 0 for a blanket
// rule or none.
func shareAt(l rlqstest.Log, x time.Time) int {
	for _, a := range l.Actions {
		if a.At.Before(x) {
			continue
		}
		if tb := a.Action.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket(); tb != nil {
			return int(tb.GetTokensPerFill().GetValue())
		}
		return 0
	}
	return 0
}

// idleShareBack checks that the client, idle from idleAt on, holds a
// share of at most a few requests a second, or none, within one TTL.
func idleShareBack(t *testing.T, c *rlqstest.Client, idleAt time.Time, ft fleetTiming) {
	t.Helper()
	share, when := -1, time.Time{}
	for _, a := range c.Log().Actions {
		if a.At.Before(idleAt) || a.At.After(idleAt.Add(ft.ttl)) {
			continue
		}
		qa := a.Action.GetQuotaAssignmentAction()
		share, when = 0, a.At
		if tb := qa.GetRateLimitStrategy().GetTokenBucket(); tb != nil {
			share = int(tb.GetTokensPerFill().GetValue())
		}
	}
	const idle = 2 // requests a second: see rlqs's demandOf
	t.Logf("the idle client's share %v after it went idle: %d/s", when.Sub(idleAt).Round(time.Millisecond), share)
	if share < 0 || share > 2*idle {
		t.Errorf("within a TTL (%v) of going idle, the client's share is %d/s, want at most %d/s", ft.ttl, share, 2*idle)
	}
}

// dump logs what each client was assigned and admitted, every report
// interval or so, for a failed test.
func dump(t *testing.T, clients []*rlqstest.Client, rec *rlqstest.Record, total time.Duration) {
	for i, c := range clients {
		var b strings.Builder
		for _, a := range c.Log().Actions {
			r := 0
			if tb := a.Action.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket(); tb != nil {
				r = int(tb.GetTokensPerFill().GetValue())
			}
			fmt.Fprintf(&b, " %.1f:%d", a.At.Sub(rec.Start).Seconds(), r)
		}
		t.Logf("client %d shares:%s", i, b.String())
		b.Reset()
		for f := time.Duration(0); f < total; f += 200 * time.Millisecond {
			fmt.Fprintf(&b, " %.1f:%.0f", f.Seconds(), rec.Rate(i, f, f+200*time.Millisecond))
		}
		t.Logf("client %d admitted/s:%s", i, b.String())
	}
}

// TestRLQSFleetNewcomer: five clients that want more than the limit
// between them hold all they may (200/s each: without a reserve, the
// whole limit) when a sixth starts: its users are
// admitted from its first answer on (a share of the reserve, not a
// DENY_ALL until the others report), it reaches its fair share two
// report intervals after it arrives, and the fleet stays within the
// limit and the documented bound throughout.
func TestRLQSFleetNewcomer(t *testing.T) {
	ft := timing(t)
	const limit = 1000
	_, clients := fleet(t, ft, limit)
	arrive := 10 * ft.report // the seven have settled
	total := arrive + 10*ft.report
	demand := func(i int, at time.Duration) float64 {
		if i == 5 || i == 6 || i == 7 && at < arrive {
			return 0
		}
		return 200
	}
	rec := rlqstest.Drive(t.Context(), clients, map[string]string{"name": "api"}, demand, total)

	first, firstAt := -1, time.Duration(0)
	if acts := clients[7].Log().Actions; len(acts) > 0 {
		first, firstAt = 0, acts[0].At.Sub(rec.Start)
		if tb := acts[0].Action.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket(); tb != nil {
			first = int(tb.GetTokensPerFill().GetValue())
		}
	}
	came := rec.Offered[7][0]
	admitted := rec.Rate(7, came, came+ft.report) * ft.report.Seconds()
	t.Logf("the newcomer's first request at %v, its first answer at %v: a share of %d/s; %.0f admitted in its first report interval",
		came.Round(time.Millisecond), firstAt.Round(time.Millisecond), first, admitted)
	if first <= 0 {
		t.Errorf("the newcomer's first answer: %d, want a share (a token bucket), not a blanket DENY_ALL", first)
	}
	if admitted < 1 {
		t.Errorf("the newcomer admitted nothing in its first report interval (%v): its users were refused for arriving", ft.report)
	}
	most, at := rec.MaxWindow(time.Second, 0, total)
	b := bound(limit, len(clients), ft.report/10, ft.report, time.Second)
	t.Logf("most admitted in a second: %d at %v (limit %d, bound %.0f)", most, at.Round(time.Millisecond), limit, b)
	if float64(most) > limit+b {
		t.Errorf("the fleet admitted %d in the second from %v: over the limit %d plus the bound %.0f", most, at, limit, b)
	}
	checkFairFrom(t, clients, rec, demand, fairLimit(limit), came, total, ft)
	if t.Failed() {
		dump(t, clients, rec, total)
	}
}

// TestRLQSFleetFailover kills one of the two replicas mid-stream (as a
// crash would: no goodbye): its four clients open a stream to the other
// at their next report, under the same name (rlqs.ClientHeader), and
// keep their shares, which the store kept; the fleet stays within the
// limit and its bound, and two report intervals after the kill every
// client admits within 10% of its fair share.
func TestRLQSFleetFailover(t *testing.T) {
	ft := timing(t)
	const limit, unit = 1000, 50.0
	reps, clients := fleet(t, ft, limit)
	demand := skewed(unit, time.Hour, time.Hour) // steady
	killAfter := 10 * ft.report                  // the shares have settled: the first report after the subscriptions measures demand
	total := killAfter + 10*ft.report
	done := make(chan *rlqstest.Record)
	go func() { done <- rlqstest.Drive(t.Context(), clients, map[string]string{"name": "api"}, demand, total) }()
	time.Sleep(killAfter)
	killed := time.Now()
	reps[0].kill(t)
	rec := <-done
	killAt := killed.Sub(rec.Start)

	// A demand that moved around the kill (a load generator fell
	// behind) moves every share: the shares are then not judged. The
	// demands are those the clients reported, as the service measured
	// them, whatever the generators offered.
	demands := make([][]measured, len(clients))
	for i, c := range clients {
		demands[i] = measuredDemands(c.Log(), ft.report, fairLimit(limit))
	}
	lagged := !steady(demands, killed.Add(-2*ft.report), killed.Add(ft.report))
	for i, c := range clients[:4] {
		l := c.Log()
		if l.Streams < 2 || l.StreamErrors < 1 {
			t.Errorf("client %d: %d streams, %d ended by an error; want a second stream after the kill", i, l.Streams, l.StreamErrors)
		}
		before, after := shareAround(l, killed)
		t.Logf("client %d: share %d/s before the kill, %d/s first after it", i, before, after)
		if lagged {
			t.Logf("client %d: share not judged: the demands reported moved by more than 10%% around the kill", i)
			continue
		}
		if before <= 0 || math.Abs(float64(after-before)) > 0.1*float64(before) {
			t.Errorf("client %d: share %d/s before the kill and %d/s after its reconnection: want it kept within 10%%", i, before, after)
		}
	}
	most, at := rec.MaxWindow(time.Second, 0, total)
	b := bound(limit, len(clients), ft.report/10, ft.report, time.Second)
	t.Logf("most admitted in a second: %d at %v (limit %d, bound %.0f); the kill at %v", most, at.Round(time.Millisecond), limit, b, killAt.Round(time.Millisecond))
	if float64(most) > limit+b {
		t.Errorf("the fleet admitted %d in the second from %v: over the limit %d plus the bound %.0f", most, at, limit, b)
	}
	phase := func(i int, t time.Duration) float64 { return demand(i, 0) }
	checkFairFrom(t, clients, rec, phase, fairLimit(limit), killAt, total, ft)
	if t.Failed() {
		dump(t, clients, rec, total)
	}
}

// shareAround returns the last share a client was assigned before t and
// the first after it.
func shareAround(l rlqstest.Log, t time.Time) (before, after int) {
	before, after = -1, -1
	for _, a := range l.Actions {
		tb := a.Action.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
		if tb == nil {
			continue
		}
		r := int(tb.GetTokensPerFill().GetValue())
		if a.At.Before(t) {
			before = r
		} else if after < 0 {
			after = r
		}
	}
	return before, after
}
