package simulate

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Colours of the plots.
var (
	requestsColor = color.RGBA{R: 0x4a, G: 0x6f, B: 0x96, A: 0xff}
	denyColor     = color.RGBA{R: 0xd9, G: 0x5f, B: 0x0e, A: 0xff}
)

// WriteHTML writes the report as one self-contained HTML page: the
// tables of WriteText, and per rule SVG plots (drawn by gonum.org/v1/plot)
// of requests and would-deny over time, the keys denied most, and the
// distribution of requests per key per window against each limit.
// Nothing in the page is fetched when it is viewed.
func (r *Report) WriteHTML(w io.Writer) error {
	type section struct {
		RuleReport
		Share           string
		Series, TopKeys template.HTML
		Rates           []template.HTML
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		return err
	}
	var sections []section
	for _, rr := range r.Rules {
		s := section{RuleReport: rr, Share: fmt.Sprintf("%.1f%%", 100*rr.DeniedKeysTraffic)}
		var err error
		if s.Series, err = svg(seriesPlot(rr)); err != nil {
			return err
		}
		if len(rr.TopDenied) > 0 {
			if s.TopKeys, err = svg(topPlot(rr)); err != nil {
				return err
			}
		}
		for _, rate := range rr.Rates {
			h, err := svg(ratePlot(rr.Rule, rate))
			if err != nil {
				return err
			}
			s.Rates = append(s.Rates, h)
		}
		sections = append(sections, s)
	}
	return page.Execute(w, map[string]any{"R": r, "Text": text.String(), "Sections": sections})
}

// svg renders p as an inline SVG element.
func svg(p *plot.Plot, err error) (template.HTML, error) {
	if err != nil {
		return "", err
	}
	c := vgsvg.New(8*vg.Inch, 3*vg.Inch)
	// A left margin: the browser's font may be wider than the metrics
	// gonum laid the tick labels (the keys) out with.
	p.Draw(draw.Crop(draw.New(c), vg.Points(36), 0, 0, 0))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", err
	}
	out := b.Bytes()
	if i := bytes.Index(out, []byte("<svg")); i > 0 { // drop the XML prolog
		out = out[i:]
	}
	return template.HTML(out), nil // #nosec: drawn by gonum, labels escaped by it
}

// seriesPlot plots a rule's requests and would-deny over time.
func seriesPlot(rr RuleReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "rule " + rr.Rule + ": requests and would-deny per " + rr.Series.Width.String()
	p.X.Tick.Marker = plot.TimeTicks{Format: "01-02\n15:04"}
	p.Y.Label.Text = "requests"
	p.Add(plotter.NewGrid())
	for _, s := range []struct {
		name string
		ys   []int64
		c    color.Color
	}{{"requests", rr.Series.Requests, requestsColor}, {"would deny", rr.Series.WouldDeny, denyColor}} {
		xys := make(plotter.XYs, len(s.ys))
		for i, y := range s.ys {
			xys[i].X = float64(rr.Series.Start.Add(time.Duration(i) * rr.Series.Width).Unix())
			xys[i].Y = float64(y)
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = s.c, vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	p.Legend.Top = true
	return p, nil
}

// topPlot plots the keys a rule denied most, as horizontal bars.
func topPlot(rr RuleReport) (*plot.Plot, error) {
	n := min(len(rr.TopDenied), 15)
	vals, names := make(plotter.Values, n), make([]string, n)
	for i, k := range rr.TopDenied[:n] {
		// Trailing spaces widen the label as gonum measures it: the
		// browser's font is often wider, and would run into the bar.
		vals[n-1-i], names[n-1-i] = float64(k.Denied), k.Key+strings.Repeat(" ", len(k.Key)/4+1)
	}
	p := plot.New()
	p.Title.Text = "rule " + rr.Rule + ": keys denied most"
	p.X.Label.Text = "would-deny"
	bars, err := plotter.NewBarChart(vals, vg.Points(9))
	if err != nil {
		return nil, err
	}
	bars.Horizontal, bars.Color, bars.LineStyle.Width = true, denyColor, 0
	p.Add(bars)
	p.NominalY(names...)
	return p, nil
}

// ratePlot plots how many (key, window) pairs made how many requests in
// a window of the limit's period, on a log scale; the buckets above the
// limit are coloured apart.
func ratePlot(rule string, rate RateReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("rule %s: requests per key per %s window, against %s", rule, time.Duration(rate.Period*1e9), rate.Limit)
	p.X.Label.Text = "requests of a key in one window"
	p.Y.Label.Text = "keys × windows"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	var under, over plotter.XYs
	names := make([]string, len(rate.Pairs))
	for b, n := range rate.Pairs {
		lo, hi := 1<<b, 1<<(b+1)-1
		names[b] = strconv.Itoa(lo)
		if hi > lo {
			names[b] += "–" + strconv.Itoa(hi)
		}
		switch {
		case n == 0: // nothing to draw on a log scale
		case hi <= rate.Rate:
			under = append(under, plotter.XY{X: float64(b), Y: float64(n)})
		default:
			over = append(over, plotter.XY{X: float64(b), Y: float64(n)})
		}
	}
	for _, s := range []struct {
		name string
		xys  plotter.XYs
		c    color.Color
	}{{"within the limit", under, requestsColor}, {"over the limit (wholly or partly)", over, denyColor}} {
		if len(s.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = s.c, draw.BoxGlyph{}, vg.Points(5)
		p.Add(sc)
		p.Legend.Add(s.name, sc)
	}
	p.Legend.Top = true
	if len(names) > 0 {
		p.NominalX(names...)
	}
	return p, nil
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>sluice simulate</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:64em;color:#222}
pre{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:12px}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}svg{max-width:100%;height:auto;display:block;margin:.5em 0}
</style></head><body>
<h1>sluice simulate</h1>
<p>{{.R.Lines}} lines of {{range $i, $f := .R.Files}}{{if $i}}, {{end}}{{$f}}{{end}}; {{.R.Requests}} requests from {{.R.From.Format "2006-01-02 15:04:05Z07:00"}} to {{.R.To.Format "2006-01-02 15:04:05Z07:00"}}; {{.R.Malformed}} lines could not be used.</p>
<pre>{{.Text}}</pre>
{{range .Sections}}
<h2>Rule {{.Rule}}{{if .PathPrefix}} ({{.PathPrefix}}){{end}}: {{.Policy}}</h2>
<p>{{.Requests}} requests, {{.WouldDeny}} would be denied ({{.Banned}} by bans, {{.Refused}} by the deny list), {{.Bans}} bans made;
{{.DeniedKeys}} of {{.Keys}} keys denied at least once, sending {{.Share}} of the traffic.</p>
{{.Series}}
{{.TopKeys}}
{{if .TopDenied}}<table><tr><th>key</th><th>would-deny</th><th>requests</th></tr>
{{range .TopDenied}}<tr><td>{{.Key}}</td><td>{{.Denied}}</td><td>{{.Requests}}</td></tr>{{end}}</table>{{end}}
{{range .Rates}}{{.}}{{end}}
{{end}}
</body></html>
`))
