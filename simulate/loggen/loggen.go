// Package loggen generates realistic access logs, for the tests and
// benchmarks of sluice simulate: clients whose activity follows a Zipf
// law, a credential-stuffing botnet spread across a /16, one IPv6 client
// rotating its address inside a /64, a crawler, and a load that rises
// and falls with the time of day.
//
// A Generator is deterministic for a seed, so a test can generate the
// same traffic twice, once as log lines and once as Events, and compute
// what it expects from the Events alone.
package loggen

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"time"
)

// A Kind is who sent a request.
type Kind uint8

// The kinds of clients.
const (
	Human   Kind = iota // Zipf-distributed clients in 100.64.0.0/10
	Botnet              // credential stuffing from 198.18.0.0/16
	Rotator             // one client rotating inside 2001:db8:bad:1::/64
	Crawler             // one crawler at 192.0.2.10
)

// Config configures a Generator. The zero value of each field means its
// default.
type Config struct {
	// Start is the time of the first request. Default 2026-01-05 00:00 UTC.
	Start time.Time
	// Duration is the span of the log. Default 24h: one day's cycle.
	Duration time.Duration
	// Clients is the number of human clients. Default 100000.
	Clients int
	// Bots is the number of addresses of the botnet. Default 4096.
	Bots int
	// Seed seeds the randomness. Default 0 (a fixed seed as well).
	Seed uint64
}

// An Event is one request.
type Event struct {
	Time      time.Time
	Addr      netip.Addr
	Method    string
	URI       string
	User      string // the botnet's and some humans' sign-ins name a user
	UserAgent string
	Status    int
	Kind      Kind
}

// A Generator produces Events in time order. It is not safe for
// concurrent use.
type Generator struct {
	c     Config
	rng   *rand.Rand
	zipf  *rand.Zipf
	rate  float64 // mean requests per second
	t     float64 // seconds since Start
	salt  uint64
	stamp []byte // the last formatted timestamp, and its second
	sec   int64
}

// New returns a Generator that spreads n requests over c.Duration.
func New(n int, c Config) *Generator {
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	}
	if c.Duration <= 0 {
		c.Duration = 24 * time.Hour
	}
	if c.Clients <= 0 {
		c.Clients = 100_000
	}
	if c.Bots <= 0 {
		c.Bots = 4096
	}
	rng := rand.New(rand.NewPCG(c.Seed, c.Seed^0x5eed))
	return &Generator{
		c: c, rng: rng, salt: rng.Uint64(), sec: -1,
		zipf: rand.NewZipf(rng, 1.1, 1, uint64(c.Clients-1)),
		rate: float64(max(n, 1)) / c.Duration.Seconds(),
	}
}

// Next returns the next request.
func (g *Generator) Next() Event {
	// A Poisson process whose rate follows the day: half the mean at
	// 04:00, one and a half times it at 16:00.
	day := 2 * math.Pi * g.t / 86400
	g.t += g.rng.ExpFloat64() / (g.rate * (1 - 0.5*math.Cos(day-2*math.Pi/6)))
	e := Event{Time: g.c.Start.Add(time.Duration(g.t * 1e9)), Method: "GET", Status: 200, UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"}
	frac := g.t / g.c.Duration.Seconds()
	switch r := g.rng.Float64(); {
	case frac > 0.4 && frac < 0.55 && r < 0.2:
		g.bot(&e)
	case 0.2 <= r && r < 0.22:
		g.rotator(&e)
	case 0.22 <= r && r < 0.27:
		e.Kind, e.Addr, e.UserAgent = Crawler, netip.AddrFrom4([4]byte{192, 0, 2, 10}), "ExampleBot/2.1 (+https://example.com/bot)"
		e.URI = "/products/" + strconv.Itoa(g.rng.IntN(50000))
	default:
		g.human(&e)
	}
	return e
}

func (g *Generator) bot(e *Event) {
	i := g.rng.IntN(g.c.Bots)
	e.Kind, e.Method, e.URI, e.Status = Botnet, "POST", "/login", 401
	e.Addr = netip.AddrFrom4([4]byte{198, 18, byte(mix(uint64(i), g.salt) >> 8), byte(mix(uint64(i), g.salt))})
	e.User = "user" + strconv.Itoa(g.rng.IntN(100000))
	e.UserAgent = "python-requests/2.32"
}

func (g *Generator) rotator(e *Event) {
	var a [16]byte
	copy(a[:], []byte{0x20, 0x01, 0x0d, 0xb8, 0x0b, 0xad, 0, 1})
	binary.BigEndian.PutUint64(a[8:], g.rng.Uint64())
	e.Kind, e.Addr, e.URI = Rotator, netip.AddrFrom16(a), "/search?q="+strconv.Itoa(g.rng.IntN(1e6))
}

func (g *Generator) human(e *Event) {
	rank := g.zipf.Uint64()
	h := mix(rank, g.salt) & (1<<22 - 1) // a /10 holds 2^22 addresses
	e.Kind, e.Addr = Human, netip.AddrFrom4([4]byte{100, 64 | byte(h>>16), byte(h >> 8), byte(h)})
	switch r := g.rng.IntN(100); {
	case r < 2:
		e.Method, e.URI, e.User, e.Status = "POST", "/login", "user"+strconv.FormatUint(rank, 10), 303
	case r < 30:
		e.URI = "/static/app." + strconv.Itoa(r) + ".js"
	default:
		e.URI = "/page/" + strconv.Itoa(g.rng.IntN(2000))
	}
}

// mix scrambles x (splitmix64's finalizer), to spread ranks and bots
// over their networks.
func mix(x, salt uint64) uint64 {
	x += salt + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// AppendCombined appends e as a line of nginx's combined format, without
// newline, timestamps in UTC.
func (g *Generator) AppendCombined(dst []byte, e Event) []byte {
	dst = e.Addr.AppendTo(dst)
	dst = append(dst, " - "...)
	if e.User != "" {
		dst = append(dst, e.User...)
	} else {
		dst = append(dst, '-')
	}
	dst = append(dst, " ["...)
	if s := e.Time.Unix(); s != g.sec {
		g.sec, g.stamp = s, e.Time.UTC().AppendFormat(g.stamp[:0], "02/Jan/2006:15:04:05 -0700")
	}
	dst = append(dst, g.stamp...)
	dst = append(dst, "] \""...)
	dst = append(dst, e.Method...)
	dst = append(dst, ' ')
	dst = append(dst, e.URI...)
	dst = append(dst, " HTTP/1.1\" "...)
	dst = strconv.AppendInt(dst, int64(e.Status), 10)
	dst = append(dst, " 512 \"-\" \""...)
	dst = append(dst, e.UserAgent...)
	return append(dst, '"')
}

// Write writes n requests of c to w as combined log lines.
func Write(w io.Writer, n int, c Config) error {
	g := New(n, c)
	bw := bufio.NewWriterSize(w, 256<<10)
	var line []byte
	for range n {
		line = append(g.AppendCombined(line[:0], g.Next()), '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}
