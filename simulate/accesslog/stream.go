package accesslog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
)

// Defaults of Config.
const (
	DefaultMaxLine = 64 << 10
	chunkSize      = 256 << 10 // bytes of lines a parser takes at once
	maxSamples     = 5         // malformed lines kept with their text, per stream
	sampleLen      = 120       // bytes of a malformed line kept
)

// Config configures a Stream. The zero value of each field means its
// default.
type Config struct {
	// Format is the format of the log. Default: detected from its first
	// non-empty line (Detect).
	Format Format
	// MaxLine caps a line's length in bytes; a longer line is counted
	// malformed and skipped without being held. Default DefaultMaxLine.
	MaxLine int
	// Workers is how many goroutines parse. Default GOMAXPROCS.
	Workers int
	// Source is the index the Entries of the stream carry.
	Source int
}

// A Malformed describes a line that could not be used.
type Malformed struct {
	Source int
	Line   int64
	Reason string
	// Text is the line's start, quoted, at most 120 bytes of it.
	Text string
}

// A Batch is the next lines of a stream, parsed: its Entries (valid
// until Release) and what could not be used.
type Batch struct {
	Entries   []Entry
	Lines     int64 // lines read, blank and malformed included
	Malformed int64
	Samples   []Malformed // the first malformed lines, with their text
	Bytes     int64       // bytes of the lines, as decompressed

	data []byte // the chunk Entries point into
	job  *job
}

// Release returns the batch's buffers for reuse; its Entries are then
// invalid.
func (b *Batch) Release() {
	if b.job != nil {
		putChunk(b.job.data)
		b.job = nil
	}
	b.Entries = b.Entries[:0]
	putBatch(b)
}

// A Stream reads one log as Batches, in the order of its lines, parsing
// them on Workers goroutines while it reads ahead. Create Streams with
// Open; a Stream is used by one goroutine.
type Stream struct {
	c      Config
	src    *bufio.Reader
	order  chan *job
	work   chan *job
	stop   chan struct{}
	once   sync.Once
	err    error // the read error that ended the stream, set before order closes
	done   bool
	Format Format // the format, as given or detected
}

// job is a chunk of whole lines on its way through the parsers.
type job struct {
	data      []byte
	firstLine int64
	tooLong   int64 // a line skipped for its length, before data; 0: none
	batch     *Batch
	ready     chan struct{}
}

// Open starts reading r (gzip when it starts with gzip's magic number)
// and returns its Stream, or an error when the format is unknown or a
// gzip header is broken. Close the Stream when done.
func Open(r io.Reader, c Config) (*Stream, error) {
	if c.MaxLine <= 0 {
		c.MaxLine = DefaultMaxLine
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		br = bufio.NewReaderSize(gz, 64<<10)
	}
	if c.Format.NewParser == nil {
		f, err := detect(br, c.MaxLine)
		if err != nil {
			return nil, err
		}
		c.Format = f
	}
	s := &Stream{c: c, src: br, order: make(chan *job, 4*c.Workers), work: make(chan *job, 4*c.Workers), stop: make(chan struct{}), Format: c.Format}
	go s.read()
	for range c.Workers {
		go s.parse(c.Format.NewParser())
	}
	return s, nil
}

// detect tells the format from the first non-empty line of br, without
// consuming it.
func detect(br *bufio.Reader, maxLine int) (Format, error) {
	head, err := br.Peek(min(maxLine, br.Size()))
	if len(head) == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return CombinedFormat, nil // empty: any format reads nothing
		}
		return Format{}, err
	}
	for len(head) > 0 {
		line, rest, found := bytes.Cut(head, []byte("\n"))
		if !found && len(line) >= maxLine {
			return Format{}, fmt.Errorf("%w: the first line is longer than %d bytes: name the format", ErrUnknownFormat, maxLine)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return Detect(line)
		}
		head = rest
	}
	return CombinedFormat, nil
}

// Next returns the next batch, or nil at the end of the log; then Err
// tells whether the log was read to its end.
func (s *Stream) Next() *Batch {
	if s.done {
		return nil
	}
	j, ok := <-s.order
	if !ok {
		s.done = true
		return nil
	}
	<-j.ready
	return j.batch
}

// Err returns the error that ended the log early (a truncated gzip
// stream, a failing read), once Next has returned nil.
func (s *Stream) Err() error { return s.err }

// Close stops reading and parsing. Batches already returned stay valid
// until released.
func (s *Stream) Close() {
	s.once.Do(func() { close(s.stop) })
	for j := range s.order { // let the reader see stop and exit
		<-j.ready
		j.batch.Release()
	}
	s.done = true
}

// read cuts the log into chunks of whole lines, each sent to the
// parsers and, in order, to Next.
func (s *Stream) read() {
	defer close(s.order)
	defer close(s.work)
	line := int64(1)
	var carry []byte
	var skipping int64 // the number of an over-long line being skipped
	for {
		buf := getChunk(s.c.MaxLine)
		buf = append(buf, carry...)
		n, err := io.ReadFull(s.src, buf[len(buf):len(buf)+chunkSize])
		buf = buf[:len(buf)+n]
		j := &job{firstLine: line, ready: make(chan struct{})}
		if skipping > 0 {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 && err == nil {
				putChunk(buf)
				continue
			}
			j.tooLong, skipping, line = skipping, 0, line+1
			j.firstLine = line
			buf = buf[min(i+1, len(buf)):]
			if i < 0 {
				buf = buf[:0]
			}
		}
		end := bytes.LastIndexByte(buf, '\n') + 1
		if err != nil { // the last line needs no newline
			end = len(buf)
		}
		carry = append(carry[:0], buf[end:]...)
		if len(carry) > s.c.MaxLine {
			skipping, carry = line+int64(bytes.Count(buf[:end], []byte("\n"))), carry[:0]
		}
		j.data = buf[:end]
		line += int64(bytes.Count(j.data, []byte("\n")))
		if !s.send(j) {
			return
		}
		if err != nil {
			s.finish(err, skipping)
			return
		}
	}
}

// finish records how the log ended: err is io.EOF or io.ErrUnexpectedEOF
// at its end, else a failure; a line still being skipped is sent.
func (s *Stream) finish(err error, skipping int64) {
	if skipping > 0 {
		s.send(&job{tooLong: skipping, ready: make(chan struct{})})
	}
	switch {
	case errors.Is(err, io.EOF):
	case errors.Is(err, io.ErrUnexpectedEOF):
		// io.ReadFull's short last read; a gzip stream cut short says so
		// through its own error, below.
		var probe [1]byte
		if _, err2 := s.src.Read(probe[:]); err2 != nil && !errors.Is(err2, io.EOF) {
			s.err = err2
		}
	default:
		s.err = err
	}
	if errors.Is(s.err, io.ErrUnexpectedEOF) {
		s.err = errors.New("the compressed stream ends early (truncated gzip?)")
	}
}

// send hands j to the parsers and to Next, or reports false when the
// stream is closed.
func (s *Stream) send(j *job) bool {
	select {
	case s.order <- j:
	case <-s.stop:
		putChunk(j.data)
		return false
	}
	s.work <- j
	return true
}

// parse parses the jobs it takes with p.
func (s *Stream) parse(p Parser) {
	for j := range s.work {
		j.batch = s.parseChunk(p, j)
		close(j.ready)
	}
}

// parseChunk parses the lines of j into a Batch.
func (s *Stream) parseChunk(p Parser, j *job) *Batch {
	b := getBatch()
	b.job, b.data, b.Lines, b.Malformed, b.Samples, b.Bytes = j, j.data, 0, 0, nil, int64(len(j.data))
	if j.tooLong > 0 {
		b.malformed(s.c.Source, j.tooLong, ErrTooLong, nil)
		b.Lines++
	}
	data, n := j.data, j.firstLine
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		b.Lines++
		n++
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(line) > s.c.MaxLine {
			b.malformed(s.c.Source, n-1, ErrTooLong, line)
			continue
		}
		b.Entries = append(b.Entries, Entry{Source: s.c.Source, Line: n - 1})
		e := &b.Entries[len(b.Entries)-1]
		if err := p.Parse(line, e); err != nil {
			b.Entries = b.Entries[:len(b.Entries)-1]
			b.malformed(s.c.Source, n-1, err, line)
		}
	}
	return b
}

// malformed counts a malformed line, keeping the first few.
func (b *Batch) malformed(source int, line int64, err error, text []byte) {
	b.Malformed++
	if len(b.Samples) < maxSamples {
		b.Samples = append(b.Samples, Malformed{Source: source, Line: line, Reason: err.Error(), Text: strconv.Quote(string(text[:min(len(text), sampleLen)]))})
	}
}

// Free lists of batches and chunks: a replay cycles through a few dozen
// of each. Unlike a sync.Pool they survive garbage collections, which a
// busy replay triggers often; beyond their capacity, buffers are left to
// the collector.
var (
	freeBatches = make(chan *Batch, 256)
	freeChunks  = make(chan []byte, 256)
)

func getBatch() *Batch {
	select {
	case b := <-freeBatches:
		return b
	default:
		return new(Batch)
	}
}

func putBatch(b *Batch) {
	select {
	case freeBatches <- b:
	default:
	}
}

// getChunk returns an empty buffer for a chunk and a carried line of up
// to maxLine bytes.
func getChunk(maxLine int) []byte {
	for {
		select {
		case c := <-freeChunks:
			if cap(c) >= chunkSize+maxLine {
				return c[:0]
			}
			continue // of a smaller cap: left to the collector
		default:
		}
		return make([]byte, 0, chunkSize+maxLine)
	}
}

func putChunk(b []byte) {
	if b == nil {
		return
	}
	select {
	case freeChunks <- b:
	default:
	}
}
