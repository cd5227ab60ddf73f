package simulate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/simulate/accesslog"
)

// Options configure Run. The zero value of each field but Config.Rules
// means its default.
type Options struct {
	// Config configures the replay.
	Config Config
	// RulesName names the rule set in reports. Default "rules".
	RulesName string
	// Compare, when set, is a second rule set to replay the same
	// requests through and compare with (named CompareName).
	Compare     *config.Config
	CompareName string
	// Files are the logs to read, merged in time order; "-" is Stdin.
	// Default: Stdin.
	Files []string
	Stdin io.Reader
	// Format is the logs' format. Default: detected per file.
	Format accesslog.Format
	// MaxLine caps a line's length. Default accesslog.DefaultMaxLine.
	MaxLine int
	// Strict makes the first malformed line, or a file cut short, an
	// error. Default false: they are counted and reported.
	Strict bool
	// Progress, when set, receives a line of progress every half second
	// (lines, lines/s, bytes, ETA), rewritten in place. Default nil.
	Progress io.Writer
	// Workers is how many goroutines decide, each the clients of a share
	// of the client networks (see the package documentation). Default 0:
	// one per processor when forward_auth.key holds the client's address
	// and there is no Compare, else 1. More than 1 otherwise is an error
	// (ErrNotParallel): the replay would not decide as serve would.
	Workers int
}

// Run replays the logs of o through the rules and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if len(o.Files) == 0 {
		o.Files = []string{"-"}
	}
	rd, prog, closeFiles, err := open(o)
	if err != nil {
		return nil, err
	}
	defer closeFiles()
	defer rd.Close()
	n, err := workers(o)
	if err != nil {
		return nil, err
	}
	if n > 1 {
		return runParallel(ctx, o, rd, prog, n)
	}
	return runSequential(ctx, o, rd, prog)
}

// runSequential replays the entries of rd in log order, through the
// rules and those of o.Compare.
func runSequential(ctx context.Context, o Options, rd *accesslog.Reader, prog *progress) (*Report, error) {
	a, err := NewReplayer(ctx, o.Config)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	var b *Replayer
	var df *differ
	if o.Compare != nil {
		cb := o.Config
		cb.Rules, cb.Routes = o.Compare, nil
		for _, rt := range o.Config.Routes { // those B has; the rest are A's only
			if _, ok := o.Compare.Rule(rt.Rule); ok {
				cb.Routes = append(cb.Routes, rt)
			}
		}
		if len(o.Config.Routes) > 0 && len(cb.Routes) == 0 {
			return nil, errors.New("compare: the other rule set has none of the rules asked for")
		}
		if b, err = NewReplayer(ctx, cb); err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		defer b.Close()
		top, sketch := o.Config.sizes(len(a.routes))
		df = newDiffer(a, b, top, sketch)
	}
	began := begin()
	from, to, err := replay(ctx, o, rd, prog, func(e *accesslog.Entry) {
		a.Decide(ctx, e)
		if b != nil {
			b.Decide(ctx, e)
			df.add()
		}
	})
	if err != nil {
		return nil, err
	}
	took := began.took()
	r := a.report(o, rd, from, to, took)
	if b != nil {
		r.Compare = &Comparison{A: cmp.Or(o.RulesName, "rules"), B: cmp.Or(o.CompareName, "compare"), Rules: df.result(), Report: b.report(o, rd, from, to, took)}
	}
	return r, nil
}

// runParallel replays the entries of rd on n workers.
func runParallel(ctx context.Context, o Options, rd *accesslog.Reader, prog *progress, n int) (*Report, error) {
	p, err := newPool(ctx, o.Config, n)
	if err != nil {
		return nil, err
	}
	defer p.close()
	began := begin()
	from, to, err := replay(ctx, o, rd, prog, p.add)
	a := p.finish()
	if err != nil {
		return nil, err
	}
	return a.report(o, rd, from, to, began.took()), nil
}

// A cost is the wall and CPU time a replay took.
type cost struct{ wall, cpu time.Duration }

// A start is the clocks' readings at the start of a replay.
type start struct {
	wall time.Time
	cpu  time.Duration
}

func begin() start { return start{time.Now(), cputime.Self()} }

// took returns the cost of the replay begun at s.
func (s start) took() cost { return cost{time.Since(s.wall), cputime.Self() - s.cpu} }

// replay decides every entry of rd, showing progress as o asks, and
// returns the first and last times logged.
func replay(ctx context.Context, o Options, rd *accesslog.Reader, prog *progress, decide func(*accesslog.Entry)) (from, to int64, err error) {
	stop := prog.start(o.Progress)
	defer stop()
	from, to, err = decideAll(ctx, rd, prog, o.Strict, decide)
	if err == nil && o.Strict && len(rd.Stats.Errors) > 0 {
		err = rd.Stats.Errors[0]
	}
	return from, to, err
}

// decideAll decides every entry of rd, and returns the first and last
// times logged.
func decideAll(ctx context.Context, rd *accesslog.Reader, prog *progress, strict bool, decide func(*accesslog.Entry)) (from, to int64, err error) {
	n := 0
	for e := rd.Next(); e != nil; e = rd.Next() {
		if n++; n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			prog.lines.Store(rd.Stats.Lines)
		}
		if strict && rd.Stats.Malformed > 0 {
			m := rd.Stats.Samples[0]
			return 0, 0, fmt.Errorf("line %d: %s: %s (-strict)", m.Line, m.Reason, m.Text)
		}
		if from == 0 || e.Time < from {
			from = e.Time
		}
		to = max(to, e.Time)
		decide(e)
	}
	if strict && rd.Stats.Malformed > 0 {
		m := rd.Stats.Samples[0]
		return 0, 0, fmt.Errorf("line %d: %s: %s (-strict)", m.Line, m.Reason, m.Text)
	}
	return from, to, nil
}

// report returns the replayer's report on what rd read.
func (r *Replayer) report(o Options, rd *accesslog.Reader, from, to int64, c cost) *Report {
	st := rd.Stats
	rep := &Report{
		Files: o.Files, Lines: st.Lines, Requests: st.Entries, Malformed: st.Malformed, MalformedLines: st.Samples,
		Backwards: st.Backwards, CheckErrors: r.errs, From: time.Unix(0, from).UTC(), To: time.Unix(0, to).UTC(),
		Seconds: c.wall.Seconds(), LinesPerSecond: float64(st.Lines) / max(c.wall.Seconds(), 1e-9),
		CPUSeconds: c.cpu.Seconds(), CPUPerLine: float64(c.cpu.Microseconds()) / float64(max(st.Lines, 1)),
	}
	rep.Format = o.Format.Name
	if rep.Format == "" {
		rep.Format = "auto"
	}
	for _, err := range st.Errors {
		rep.Errors = append(rep.Errors, err.Error())
	}
	if r.first != nil {
		rep.Errors = append(rep.Errors, "first failed check: "+r.first.Error())
	}
	for _, rs := range r.routes {
		rep.Rules = append(rep.Rules, rs.report())
	}
	return rep
}

// open opens the files of o as a Reader, with the progress of reading
// them, and returns a function that closes them.
func open(o Options) (*accesslog.Reader, *progress, func(), error) {
	prog := &progress{}
	var streams []*accesslog.Stream
	var files []*os.File
	closeAll := func() {
		for _, s := range streams {
			s.Close()
		}
		for _, f := range files {
			f.Close()
		}
	}
	for i, name := range o.Files {
		var src io.Reader = o.Stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				closeAll()
				return nil, nil, nil, err
			}
			files = append(files, f)
			if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
				prog.total += fi.Size()
			}
			src = f
		} else if src == nil {
			src = os.Stdin
		}
		s, err := accesslog.Open(&countingReader{r: src, n: &prog.bytes}, accesslog.Config{Format: o.Format, MaxLine: o.MaxLine, Source: i})
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		streams = append(streams, s)
	}
	rd := accesslog.NewReader(streams, o.Files)
	return rd, prog, func() {
		for _, f := range files {
			f.Close()
		}
	}, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// progress is what a replay has read so far.
type progress struct {
	lines, bytes atomic.Int64
	total        int64 // bytes of the files; 0 when unknown (stdin)
}

// start writes the progress to w every half second until stopped; the
// stop function clears the line.
func (p *progress) start(w io.Writer) (stop func()) {
	if w == nil {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		begin := time.Now()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				fmt.Fprint(w, "\r\033[K"+p.line(time.Since(begin)))
			}
		}
	}()
	return func() { close(done); <-exited }
}

// line describes the progress after elapsed.
func (p *progress) line(elapsed time.Duration) string {
	lines, read := p.lines.Load(), p.bytes.Load()
	s := fmt.Sprintf("%d lines, %.0f lines/s, %s read", lines, float64(lines)/elapsed.Seconds(), size(read))
	if p.total > 0 && read > 0 {
		left := time.Duration(float64(elapsed) * float64(p.total-read) / float64(read))
		s += fmt.Sprintf(" of %s (%.0f%%), ETA %s", size(p.total), 100*float64(read)/float64(p.total), left.Round(time.Second))
	}
	return s
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
