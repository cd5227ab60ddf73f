package main

import (
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/sluicehq/sluice/bench/internal/results"
)

// Layout of every chart.
const (
	width       = 9 * vg.Inch
	height      = 4.5 * vg.Inch
	legendWidth = 2.3 * vg.Inch
	captionSize = 9 * vg.Length(1) // points
	margin      = 6 * vg.Length(1)
)

// Bars of sluice's implementations are orange, the peers' muted blues and
// greys, so that sluice stands out whatever the peer.
var (
	oursColors = []color.Color{rgb(0xd9, 0x5f, 0x0e), rgb(0xfe, 0x99, 0x29), rgb(0xfe, 0xc4, 0x4f)}
	peerColors = []color.Color{rgb(0x4a, 0x6f, 0x96), rgb(0x8c, 0xa6, 0xc4), rgb(0x7a, 0x7a, 0x7a), rgb(0xb0, 0xb0, 0xb0), rgb(0x9e, 0x9a, 0xc8)}
)

func rgb(r, g, b uint8) color.Color { return color.RGBA{R: r, G: g, B: b, A: 0xff} }

// render writes c as an SVG document to w: the plot, the legend at its
// right and the caption under both. Fonts are named, not embedded, so the
// same chart always gives the same bytes.
func render(c *chart, w io.Writer) error {
	canvas := vgsvg.New(width, height)
	if err := drawChart(c, draw.New(canvas)); err != nil {
		return err
	}
	_, err := canvas.WriteTo(w)
	return err
}

// drawChart draws c on dc, a canvas of width × height.
func drawChart(c *chart, dc draw.Canvas) error {
	p, legend, err := newPlot(c)
	if err != nil {
		return err
	}
	dc.SetColor(color.White) // the page's colour may be dark
	dc.Fill(dc.Rectangle.Path())
	captionHeight := drawCaption(dc, c.caption)
	p.Draw(draw.Crop(dc, 0, -legendWidth, captionHeight, 0))
	legend.Draw(draw.Crop(dc, width-legendWidth+margin, -margin, captionHeight, -3*margin))
	return nil
}

// newPlot returns the plot of c's bars, grouped by scenario, and their
// legend, drawn apart from the plot so that it never hides a bar.
func newPlot(c *chart) (*plot.Plot, plot.Legend, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = c.xlabel
	p.Y.Label.Text = c.ylabel
	p.Y.Tick.Marker = tickMarker{}
	p.NominalX(c.groups...)
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = 9
	legend.Padding = 2
	// Every bar, and one bar's width between groups, across the plot
	// less its Y axis.
	barW := (width - legendWidth - 1.2*vg.Inch) / vg.Length(len(c.groups)*len(c.series)+len(c.groups))
	nours, npeers := 0, 0
	for i, s := range c.series {
		fill := peerColors[npeers%len(peerColors)]
		if s.ours {
			fill = oursColors[nours%len(oursColors)]
			nours++
		} else {
			npeers++
		}
		offset := (vg.Length(i) - vg.Length(len(c.series)-1)/2) * barW
		b, more, err := bars(s, fill, barW, offset)
		if err != nil {
			return nil, legend, err
		}
		p.Add(b)
		p.Add(more...)
		legend.Add(s.label, b)
	}
	p.X.Min, p.X.Max = -0.5, float64(len(c.groups))-0.5
	p.Y.Min, p.Y.Max = 0, max(1.1*top(c), 1e-9) // bars of 0 still need a range
	return p, legend, nil
}

// bars returns the bars of one series and what goes on them: the bars
// stacked on them in a lighter shade, and the labels above (the value of
// sluice's, † on a peer that did not do the same work).
func bars(s series, fill color.Color, w, offset vg.Length) (*plotter.BarChart, []plot.Plotter, error) {
	b, err := plotter.NewBarChart(plotter.Values(s.values), w)
	if err != nil {
		return nil, nil, err
	}
	b.Color, b.Offset = fill, offset
	b.LineStyle.Width = 0.5
	var more []plot.Plotter
	if s.stacked != nil {
		st, err := plotter.NewBarChart(plotter.Values(s.stacked), w)
		if err != nil {
			return nil, nil, err
		}
		st.Color, st.LineStyle.Width = lighter(fill), 0.5
		st.StackOn(b)
		more = append(more, st)
	}
	labels, err := barLabels(s, offset)
	if err != nil {
		return nil, nil, err
	}
	return b, append(more, labels), nil
}

// barLabels returns the labels above the bars of s.
func barLabels(s series, offset vg.Length) (*plotter.Labels, error) {
	var xy plotter.XYLabels
	for i, v := range s.values {
		if s.stacked != nil {
			v += s.stacked[i]
		}
		text := ""
		switch {
		case s.ours:
			text = short(v)
		case s.unlike[i]:
			text = "†"
		}
		xy.XYs = append(xy.XYs, plotter.XY{X: float64(i), Y: v})
		xy.Labels = append(xy.Labels, text)
	}
	l, err := plotter.NewLabels(xy)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
		l.TextStyle[i].Font.Size = 7
	}
	l.Offset = vg.Point{X: offset, Y: 2}
	return l, nil
}

// drawCaption writes lines at the bottom left of c and returns the height
// they take.
func drawCaption(c draw.Canvas, lines []string) vg.Length {
	sty := draw.TextStyle{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, captionSize),
		Handler: plot.DefaultTextHandler,
	}
	lineHeight := 1.4 * captionSize
	for i, line := range lines {
		y := c.Min.Y + margin + vg.Length(len(lines)-1-i)*lineHeight
		c.FillText(sty, vg.Point{X: c.Min.X + margin, Y: y}, line)
	}
	return vg.Length(len(lines))*lineHeight + margin
}

// top returns the height of the highest bar of c.
func top(c *chart) float64 {
	m := 0.0
	for _, s := range c.series {
		for i, v := range s.values {
			if s.stacked != nil {
				v += s.stacked[i]
			}
			m = max(m, v)
		}
	}
	return m
}

// lighter returns c mixed half and half with white.
func lighter(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8((v>>8 + 0xff) / 2) }
	return rgb(mix(r), mix(g), mix(b))
}

// short formats v for a label or a tick: 141.4k rather than 141356, 200k
// rather than 200000.
func short(v float64) string {
	if v >= 10_000 {
		return strings.TrimSuffix(strconv.FormatFloat(v/1000, 'f', 1, 64), ".0") + "k"
	}
	return results.Format(v)
}

// tickMarker labels four to nine ticks at multiples of 1, 2 or 5 times a
// power of ten, with labels formatted by short.
type tickMarker struct{}

// Ticks returns the ticks between lo and hi.
func (tickMarker) Ticks(lo, hi float64) []plot.Tick {
	step := niceStep((hi - lo) / 8)
	var ticks []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi; i++ {
		ticks = append(ticks, plot.Tick{Value: i * step, Label: short(i * step)})
	}
	return ticks
}

// niceStep returns the smallest of 1, 2 and 5 times a power of ten that is
// at least d; 1 unless d is positive and finite.
func niceStep(d float64) float64 {
	if d <= 0 || math.IsInf(d, 0) || math.IsNaN(d) {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(d)))
	for _, m := range []float64{1, 2, 5} {
		if m*pow >= d {
			return m * pow
		}
	}
	return 10 * pow
}
