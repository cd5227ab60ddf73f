package simulate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/simulate/accesslog"
)

// A Report is what a replay found: the input read, and per rule what it
// would have decided. It marshals to the JSON of sluice simulate -json.
type Report struct {
	Files     []string `json:"files"`
	Format    string   `json:"format"`
	Lines     int64    `json:"lines"`
	Requests  int64    `json:"requests"`
	Malformed int64    `json:"malformed"`
	// MalformedLines are the first malformed lines, with the reason.
	MalformedLines []accesslog.Malformed `json:"malformed_lines,omitempty"`
	// Backwards counts requests logged earlier than the one before.
	Backwards int64 `json:"backwards"`
	// Errors are files that ended early, and the first failed check.
	Errors      []string  `json:"errors,omitempty"`
	CheckErrors int64     `json:"check_errors"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	// Seconds is how long the replay took, LinesPerSecond its speed;
	// CPUSeconds the CPU time the process spent meanwhile (user and
	// system, on every core), CPUPerLine that in microseconds a line:
	// the cost of the rule set, steadier than the speed on a busy machine.
	Seconds        float64      `json:"seconds"`
	LinesPerSecond float64      `json:"lines_per_second"`
	CPUSeconds     float64      `json:"cpu_seconds"`
	CPUPerLine     float64      `json:"cpu_us_per_line"`
	Rules          []RuleReport `json:"rules"`
	// Compare is the comparison with another rule set (-compare).
	Compare *Comparison `json:"compare,omitempty"`
}

// A RuleReport is what one rule would have decided.
type RuleReport struct {
	Rule       string `json:"rule"`
	PathPrefix string `json:"path_prefix,omitempty"`
	Policy     string `json:"policy"`
	Shadow     bool   `json:"shadow,omitempty"`
	// Requests the rule was asked about; WouldDeny those it would have
	// denied (shadow denials included, Shadowed of them), Banned and
	// Refused of them by a ban or the deny list; Exempt those the allow
	// list let through; Bans the bans its denials made in the jails.
	Requests  int64 `json:"requests"`
	WouldDeny int64 `json:"would_deny"`
	Shadowed  int64 `json:"shadowed"`
	Banned    int64 `json:"banned"`
	Refused   int64 `json:"refused"`
	Exempt    int64 `json:"exempt"`
	Bans      int64 `json:"bans"`
	// Keys and DeniedKeys are the distinct keys seen and ever denied
	// (HyperLogLog estimates, ±2%).
	Keys        int64      `json:"keys"`
	DeniedKeys  int64      `json:"denied_keys"`
	FirstDenial *time.Time `json:"first_denial,omitempty"`
	LastDenial  *time.Time `json:"last_denial,omitempty"`
	// DeniedKeysTraffic is the share of the rule's requests sent by keys
	// it ever denied, before and after their first denial: a lower bound
	// from the heavy-hitter sketch (exact for keys above requests/4096).
	DeniedKeysTraffic float64 `json:"denied_keys_traffic"`
	// TopDenied are the keys denied most (Space-Saving: a count may be
	// overstated by its Err).
	TopDenied []KeyCount   `json:"top_denied"`
	Series    Series       `json:"series"`
	Rates     []RateReport `json:"rates"`
}

// A KeyCount is a key's denials and requests, from the sketches.
type KeyCount struct {
	Key      string `json:"key"`
	Denied   int64  `json:"denied"`
	Requests int64  `json:"requests,omitempty"`
	Err      int64  `json:"err,omitempty"`
}

// A Series is requests and would-deny denials per bucket of time.
type Series struct {
	Start     time.Time     `json:"start"`
	Width     time.Duration `json:"width_ns"`
	Requests  []int64       `json:"requests"`
	WouldDeny []int64       `json:"would_deny"`
}

// A RateReport is the distribution of requests per key per window of a
// limit's period: Pairs[b] (key, window) pairs made 2^b to 2^(b+1)-1
// requests.
type RateReport struct {
	Limit     string  `json:"limit"`
	Rate      int     `json:"rate"`
	Period    float64 `json:"period_seconds"`
	Pairs     []int64 `json:"pairs"`
	Untallied int64   `json:"untallied"`
}

// report returns the rule's report.
func (rs *ruleStats) report() RuleReport {
	var policy []string
	for _, l := range rs.rule.Limits {
		policy = append(policy, l.String())
	}
	r := RuleReport{
		Rule: rs.route.Rule, PathPrefix: rs.route.PathPrefix, Policy: strings.Join(policy, ", "), Shadow: rs.rule.Shadow,
		Requests: rs.Requests, WouldDeny: rs.WouldDeny, Shadowed: rs.Shadowed, Banned: rs.Banned, Refused: rs.Refused,
		Exempt: rs.Exempt, Bans: rs.Bans, Keys: rs.path.keys.count(), DeniedKeys: rs.deniedKeys.count(),
		TopDenied: []KeyCount{},
	}
	if rs.WouldDeny > 0 {
		f, l := time.Unix(0, rs.FirstDenial).UTC(), time.Unix(0, rs.LastDenial).UTC()
		r.FirstDenial, r.LastDenial = &f, &l
		r.DeniedKeysTraffic = float64(rs.path.traffic.deniedShare(rs.col)) / float64(rs.Requests)
	}
	if r.DeniedKeys > 0 && r.Keys < r.DeniedKeys {
		r.Keys = r.DeniedKeys // two estimates; the denied are among the seen
	}
	for _, c := range rs.denials.top(rs.top, func(c *counter) int64 { return c.count }) {
		kc := KeyCount{Key: c.key, Denied: c.count, Err: c.err}
		if tc, ok := rs.path.traffic.idx[c.hash]; ok {
			kc.Requests = tc.count
		}
		r.TopDenied = append(r.TopDenied, kc)
	}
	s := &rs.series
	n := seriesLen
	for n > 0 && s.req[n-1] == 0 {
		n--
	}
	r.Series = Series{Start: time.Unix(0, s.start).UTC(), Width: time.Duration(s.width), Requests: s.req[:n:n], WouldDeny: s.deny[:n:n]}
	rs.path.rates.flush() // again, if another rule of the route was reported: a no-op
	for i, h := range rs.rates {
		b := len(h.Buckets)
		for b > 0 && h.Buckets[b-1] == 0 {
			b--
		}
		l := rs.rule.Limits[i]
		r.Rates = append(r.Rates, RateReport{Limit: l.String(), Rate: l.Rate, Period: l.Period.Seconds(), Pairs: h.Buckets[:b:b], Untallied: h.Untallied})
	}
	return r
}

// WriteText writes the report as tables for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	p := &printer{w: w}
	p.printf("%d lines of %s (%s), %d requests", r.Lines, strings.Join(r.Files, ", "), r.Format, r.Requests)
	if r.Requests > 0 {
		p.printf(", %s to %s", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
	}
	p.printf("; %.1f s, %.0f lines/s, %.2f µs of CPU a line\n", r.Seconds, r.LinesPerSecond, r.CPUPerLine)
	if r.Malformed > 0 || r.Backwards > 0 || r.CheckErrors > 0 {
		p.printf("could not use %d lines (malformed); %d requests logged out of order; %d checks failed\n", r.Malformed, r.Backwards, r.CheckErrors)
	}
	for _, m := range r.MalformedLines {
		p.printf("  %s:%d: %s: %s\n", r.file(m.Source), m.Line, m.Reason, m.Text)
	}
	for _, e := range r.Errors {
		p.printf("error: %s\n", e)
	}
	p.printf("\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rule\tpolicy\trequests\twould deny\t%\tbanned\tbans\tkeys\tdenied keys\ttheir traffic\tfirst denial\tlast denial\t")
	for _, rr := range r.Rules {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%d\t%d\t%d\t%d\t%.1f%%\t%s\t%s\t\n", rr.label(), rr.Policy, rr.Requests, rr.WouldDeny,
			pct(rr.WouldDeny, rr.Requests), rr.Banned, rr.Bans, rr.Keys, rr.DeniedKeys, 100*rr.DeniedKeysTraffic, stamp(rr.FirstDenial), stamp(rr.LastDenial))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, rr := range r.Rules {
		if len(rr.TopDenied) == 0 {
			continue
		}
		p.printf("\ntop keys denied by %s:\n", rr.label())
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, k := range rr.TopDenied {
			fmt.Fprintf(tw, "  %s\t%d denied\tof %d requests\t\n", k.Key, k.Denied, k.Requests)
		}
		_ = tw.Flush()
	}
	if r.Compare != nil {
		r.Compare.writeText(p)
	}
	return p.err
}

func (rr *RuleReport) label() string {
	l := rr.Rule
	if rr.PathPrefix != "" {
		l += "=" + rr.PathPrefix
	}
	if rr.Shadow {
		l += " (shadow)"
	}
	return l
}

func (r *Report) file(i int) string {
	if i < len(r.Files) {
		return r.Files[i]
	}
	return "?"
}

func pct(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// printer writes formatted text, keeping the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
