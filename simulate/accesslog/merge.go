package accesslog

import "fmt"

// Stats counts what a Reader read.
type Stats struct {
	// Lines is the lines read, Entries those parsed into requests,
	// Malformed those that could not be (Samples holds the first few).
	Lines, Entries, Malformed int64
	Samples                   []Malformed
	// Bytes is the bytes of lines read, after decompression.
	Bytes int64
	// Backwards counts the entries logged earlier than the entry before
	// them (logs are written as requests end, so slightly out of order;
	// merged files that overlap badly show here).
	Backwards int64
	// Errors are the errors that ended files early, one per such file.
	Errors []error
}

// A Reader merges Streams into one sequence of Entries in time order:
// at each step the earliest of the streams' next entries (each stream in
// its own order). Create Readers with NewReader; a Reader is used by one
// goroutine.
type Reader struct {
	streams []*Stream
	names   []string
	cur     []*Batch
	pos     []int
	last    int   // the stream of the entry returned last, -1 none
	prev    int64 // its time
	Stats   Stats
}

// NewReader returns the Reader of streams, whose Source indexes name
// their files in names (for errors).
func NewReader(streams []*Stream, names []string) *Reader {
	r := &Reader{streams: streams, names: names, cur: make([]*Batch, len(streams)), pos: make([]int, len(streams)), last: -1}
	for i := range streams {
		r.fill(i)
	}
	return r
}

// Next returns the next entry, or nil at the end of every stream. The
// entry is valid until the next call of Next.
func (r *Reader) Next() *Entry {
	if r.last >= 0 {
		r.pos[r.last]++
		if r.pos[r.last] == len(r.cur[r.last].Entries) {
			r.cur[r.last].Release()
			r.cur[r.last] = nil
			r.fill(r.last)
		}
	}
	best := -1
	for i, b := range r.cur {
		if b != nil && (best < 0 || b.Entries[r.pos[i]].Time < r.cur[best].Entries[r.pos[best]].Time) {
			best = i
		}
	}
	r.last = best
	if best < 0 {
		return nil
	}
	e := &r.cur[best].Entries[r.pos[best]]
	if e.Time < r.prev {
		r.Stats.Backwards++
	}
	r.prev = e.Time
	r.Stats.Entries++
	return e
}

// fill takes the next batch of stream i that has entries, counting those
// it passes, or leaves it nil at the stream's end.
func (r *Reader) fill(i int) {
	for {
		b := r.streams[i].Next()
		if b == nil {
			if err := r.streams[i].Err(); err != nil {
				r.Stats.Errors = append(r.Stats.Errors, fmt.Errorf("%s: %w", r.names[i], err))
			}
			return
		}
		r.Stats.Lines += b.Lines
		r.Stats.Malformed += b.Malformed
		r.Stats.Bytes += b.Bytes
		for _, m := range b.Samples {
			if len(r.Stats.Samples) < maxSamples {
				r.Stats.Samples = append(r.Stats.Samples, m)
			}
		}
		if len(b.Entries) > 0 {
			r.cur[i], r.pos[i] = b, 0
			return
		}
		b.Release()
	}
}

// Close closes every stream.
func (r *Reader) Close() {
	for i, s := range r.streams {
		if r.cur[i] != nil {
			r.cur[i].Release()
			r.cur[i] = nil
		}
		s.Close()
	}
}
