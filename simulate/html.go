package simulate

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/uplot"
)

// WriteHTML writes the report as one self-contained HTML page: a table
// of the rules' figures, then per rule a chart of requests and would-deny
// over time (uPlot, the dashboard's chart library, embedded in the page;
// its legend under the chart), the keys
// denied most and the distribution of requests per key per window against
// each limit, as tables with bars. Nothing in the page is fetched when it
// is viewed.
func (r *Report) WriteHTML(w io.Writer) error {
	type section struct {
		RuleReport
		Share, Denied string
		Top           []bar
		Rates         []rateTable
	}
	charts := map[string]chartData{}
	var sections []section
	for i, rr := range r.Rules {
		s := section{RuleReport: rr, Share: percent(rr.DeniedKeysTraffic), Denied: percent(ratio(rr.WouldDeny, rr.Requests)), Top: topBars(rr)}
		for _, rate := range rr.Rates {
			s.Rates = append(s.Rates, rateBars(rate))
		}
		sections = append(sections, s)
		charts["chart-"+strconv.Itoa(i)] = seriesData(rr)
	}
	return page.Execute(w, map[string]any{"R": r, "Sections": sections, "Charts": charts, // encoded as JSON by html/template
		"Lib": template.JS(uplot.JS), "LibCSS": template.CSS(uplot.CSS)}) // #nosec: the vendored library
}

// chartData is what the page's script draws of a rule: the start of each
// bucket in Unix seconds, and the counts.
type chartData struct {
	Width     string  `json:"width"`
	Times     []int64 `json:"times"`
	Requests  []int64 `json:"requests"`
	WouldDeny []int64 `json:"would_deny"`
}

func seriesData(rr RuleReport) chartData {
	d := chartData{Width: rr.Series.Width.String(), Requests: rr.Series.Requests, WouldDeny: rr.Series.WouldDeny}
	for i := range rr.Series.Requests {
		d.Times = append(d.Times, rr.Series.Start.Add(time.Duration(i)*rr.Series.Width).Unix())
	}
	return d
}

// A bar is a row of a table with a bar: a label, a count, the bar's
// length in percent of the largest, and whether it is over a limit.
type bar struct {
	Label, Note string
	Count       int64
	Percent     float64
	Over        bool
}

// topBars returns the keys a rule denied most, at most 15.
func topBars(rr RuleReport) []bar {
	top := rr.TopDenied[:min(len(rr.TopDenied), 15)]
	var most int64 = 1
	for _, k := range top {
		most = max(most, k.Denied)
	}
	out := make([]bar, len(top))
	for i, k := range top {
		out[i] = bar{Label: k.Key, Count: k.Denied, Percent: 100 * float64(k.Denied) / float64(most), Note: strconv.FormatInt(k.Requests, 10), Over: true}
		if k.Err > 0 {
			out[i].Note += fmt.Sprintf(" (count ≤ %d over)", k.Err)
		}
	}
	return out
}

// A rateTable is the distribution of a limit's requests per key per
// window, a bar a bucket of 2^b to 2^(b+1)-1 requests.
type rateTable struct {
	Title     string
	Bars      []bar
	Untallied int64
}

func rateBars(rate RateReport) rateTable {
	t := rateTable{Title: fmt.Sprintf("requests of a key in one %s window, against %s", time.Duration(rate.Period*1e9), rate.Limit), Untallied: rate.Untallied}
	var most int64 = 1
	for _, n := range rate.Pairs {
		most = max(most, n)
	}
	for b, n := range rate.Pairs {
		lo, hi := 1<<b, 1<<(b+1)-1
		label := strconv.Itoa(lo)
		if hi > lo {
			label += " to " + strconv.Itoa(hi)
		}
		t.Bars = append(t.Bars, bar{Label: label, Count: n, Percent: 100 * float64(n) / float64(most), Over: hi > rate.Rate})
	}
	return t
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sluice simulate</title>
<style>{{.LibCSS}}</style>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:64em;padding:0 1em;color:#222}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}
td:first-child,th:first-child{text-align:left}th{font-weight:600}
td.key{text-align:left;font-family:ui-monospace,monospace;overflow-wrap:anywhere;max-width:24em}
td.bar{width:40%;min-width:8em}.bar div{height:.9em;background:#4a6f96}.bar div.over{background:#d95f0e}
.chart{margin:.5em 0 1em}.chart h3{font-size:1em;margin:.2em 0}
.u-legend{font-size:13px;text-align:left}.u-legend th{font-weight:400}
.hint{color:#555}
p,h1,h2,h3{overflow-wrap:anywhere}
</style></head><body>
<h1>sluice simulate</h1>
<p>{{.R.Lines}} lines of {{range $i, $f := .R.Files}}{{if $i}}, {{end}}{{$f}}{{end}}; {{.R.Requests}} requests from {{.R.From.Format "2006-01-02 15:04:05Z07:00"}} to {{.R.To.Format "2006-01-02 15:04:05Z07:00"}}; {{.R.Malformed}} lines could not be used.</p>
<div class="scroll"><table id="summary">
<thead><tr><th>rule</th><th>policy</th><th>requests</th><th>would deny</th><th>share</th><th>by bans</th><th>by the deny list</th><th>bans made</th><th>keys</th><th>keys denied</th><th>their traffic</th></tr></thead>
<tbody>{{range .Sections}}<tr><td>{{.Rule}}{{if .PathPrefix}} ({{.PathPrefix}}){{end}}{{if .Shadow}} (shadow){{end}}</td><td>{{.Policy}}</td><td>{{.Requests}}</td><td>{{.WouldDeny}}</td><td>{{.Denied}}</td><td>{{.Banned}}</td><td>{{.Refused}}</td><td>{{.Bans}}</td><td>{{.Keys}}</td><td>{{.DeniedKeys}}</td><td>{{.Share}}</td></tr>{{end}}</tbody>
</table></div>
<p class="hint">Keys and keys denied are estimates (±2%); their traffic is the share of the rule's requests sent by keys it denied at least once, a lower bound.</p>
{{range $i, $s := .Sections}}
<section>
<h2>Rule {{.Rule}}{{if .PathPrefix}} ({{.PathPrefix}}){{end}}: {{.Policy}}</h2>
<div class="chart" data-chart="chart-{{$i}}"><h3>Requests and would-deny per <span class="width"></span></h3></div>
{{if .Top}}<h3>Keys denied most</h3>
<div class="scroll"><table class="top"><thead><tr><th>key</th><th>would deny</th><th>requests</th><th></th></tr></thead><tbody>
{{range .Top}}<tr><td class="key">{{.Label}}</td><td>{{.Count}}</td><td>{{.Note}}</td><td class="bar"><div class="over" style="width:{{printf "%.1f" .Percent}}%"></div></td></tr>
{{end}}</tbody></table></div>{{end}}
{{range .Rates}}<h3>How many keys × windows made how many {{.Title}}</h3>
<div class="scroll"><table class="rates"><thead><tr><th>requests</th><th>keys × windows</th><th></th><th></th></tr></thead><tbody>
{{range .Bars}}<tr><td>{{.Label}}</td><td>{{.Count}}</td><td>{{if .Over}}over the limit{{else}}within{{end}}</td><td class="bar"><div{{if .Over}} class="over"{{end}} style="width:{{printf "%.1f" .Percent}}%"></div></td></tr>
{{end}}</tbody></table></div>{{if .Untallied}}<p class="hint">{{.Untallied}} not tallied.</p>{{end}}{{end}}
</section>
{{end}}
<script>{{.Lib}}</script>
<script>
"use strict";
(() => {
  const charts = {{.Charts}};
  const integers = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9];
  const plots = [];
  for (const box of document.querySelectorAll("[data-chart]")) {
    const d = charts[box.dataset.chart];
    box.querySelector(".width").textContent = d.width;
    const opts = {
      width: box.clientWidth, height: 240,
      legend: { live: false }, // under the chart, the series' names; never "--" for want of a cursor
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
      axes: [{}, { size: 60, incrs: integers, values: (u, vals) => vals.map((v) => v.toLocaleString("en-US")) }],
      series: [{}, { label: "requests", stroke: "#4a6f96", width: 2 }, { label: "would deny", stroke: "#d95f0e", width: 2, dash: [6, 4] }],
    };
    plots.push([box, new uPlot(opts, [d.times, d.requests, d.would_deny], box)]);
  }
  addEventListener("resize", () => { for (const [box, p] of plots) p.setSize({ width: box.clientWidth, height: 240 }); });
  document.body.dataset.drawn = "1";
})();
</script>
</body></html>
`))
