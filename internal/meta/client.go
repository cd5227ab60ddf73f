// Package meta is a minimal client for memcached's meta protocol (mg, ms,
// md, ma, mn), written for the memcached store (and used by the memcached
// ban registry) because the maintained Go clients speak only the classic
// text protocol, which needs two round
// trips to create-or-increment a counter with an expiry (add, then incr)
// and cannot pipeline mixed commands.
//
// A Client talks to one server over a pool of connections. A Batch of
// commands goes out in one write and its replies come back in one read:
// one round trip whatever the number of commands. Replies are parsed
// strictly; anything outside the protocol closes the connection with an
// error wrapping ErrProtocol, never a panic.
package meta

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by a Client after Close.
var ErrClosed = errors.New("meta: client closed")

// maxPending bounds the replies to fire-and-forget commands a connection
// may owe before it is drained in line.
const maxPending = 64

// flushDelay is how long commands given to Send may wait for the
// connection's next batch, to go out in the same write, before they are
// written on their own.
const flushDelay = 500 * time.Microsecond

// Config configures a Client. The zero value of each field but Addr
// means its default.
type Config struct {
	// Addr is the server's "host:port". Required.
	Addr string
	// DialTimeout bounds connecting. Default 1s.
	DialTimeout time.Duration
	// Timeout bounds one round trip when the context has no earlier
	// deadline. Default 1s.
	Timeout time.Duration
	// MaxIdle is the most idle connections kept open. Default 64.
	MaxIdle int
}

// A Client sends batches of meta commands to one memcached server over a
// pool of connections, opened on demand and kept up to MaxIdle idle. The
// most recently used idle connection is reused first, so that a caller
// running alone sends everything on one connection, in order: what it
// sent with Send is applied before its next batch.
//
// Create Clients with New; the zero value is not usable. A Client is safe
// for concurrent use.
type Client struct {
	addr        string
	timeout     time.Duration
	dialTimeout time.Duration
	maxIdle     int
	mu          sync.Mutex
	idle        []*conn // a stack: a caller that runs alone reuses one connection
	closed      atomic.Bool
	dropped     atomic.Int64
	roundTrips  atomic.Int64
	sends       atomic.Int64
}

type conn struct {
	nc      net.Conn
	br      *bufio.Reader
	pending int         // replies to commands given to Send, still unread
	out     []byte      // batches given to Send and not yet written
	timer   *time.Timer // writes out when the connection stays idle
}

// New returns a Client for c.Addr. It does not connect until first used.
func New(c Config) *Client {
	if c.DialTimeout <= 0 {
		c.DialTimeout = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.MaxIdle <= 0 {
		c.MaxIdle = 64
	}
	return &Client{addr: c.Addr, timeout: c.Timeout, dialTimeout: c.DialTimeout, maxIdle: c.MaxIdle}
}

// Addr returns the server's address.
func (c *Client) Addr() string { return c.addr }

// Dropped returns how many replies to batches sent with Send were errors
// (or were lost with their connection): their effect is unknown.
func (c *Client) Dropped() int64 { return c.dropped.Load() }

// RoundTrips returns how many batches Do has sent, and Sends how many
// Send has: a Do is one round trip, a Send one write with no wait.
func (c *Client) RoundTrips() int64 { return c.roundTrips.Load() }

// Sends returns how many batches Send has written.
func (c *Client) Sends() int64 { return c.sends.Load() }

// Do sends b and reads one reply per command into b.Replies, in one
// round trip. An error means the batch failed as a whole (a network
// error, a timeout, the context ended, a protocol error): some commands
// may have been applied. Error replies to single commands are not errors
// of Do; see Reply.Err.
func (c *Client) Do(ctx context.Context, b *Batch) error {
	if b.err != nil {
		return b.err
	}
	if b.n == 0 {
		return nil
	}
	c.roundTrips.Add(1)
	return c.exchange(ctx, b)
}

// Send queues b on a connection and returns without waiting: the
// commands go out ahead of the connection's next batch, in the same write,
// or on their own after at most flushDelay if the connection stays idle.
// Their replies are read and discarded by the connection's next user
// (errors are counted in Dropped). A caller running alone reuses the same
// connection, so its next batch reaches the server after what it queued.
// Send suits writes whose outcome does not change the caller's answer,
// such as rolling back a counter.
func (c *Client) Send(ctx context.Context, b *Batch) error {
	if b.err != nil {
		return b.err
	}
	if b.n == 0 {
		return nil
	}
	if c.closed.Load() {
		return ErrClosed
	}
	c.sends.Add(1)
	cn, err := c.get(ctx)
	if err != nil {
		return fmt.Errorf("memcached %s: %w", c.addr, err)
	}
	// No "mn" to end them: memcached writes its replies out at an mn,
	// which would split the next batch's replies into a second segment.
	cn.out = append(cn.out, b.buf...)
	cn.pending += b.n
	c.put(cn)
	return nil
}

func (c *Client) exchange(ctx context.Context, b *Batch) error {
	if c.closed.Load() {
		return ErrClosed
	}
	cn, err := c.get(ctx)
	if err != nil {
		return fmt.Errorf("memcached %s: %w", c.addr, err)
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := cn.nc.SetDeadline(deadline); err != nil {
		c.discard(cn)
		return fmt.Errorf("memcached %s: %w", c.addr, err)
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { cn.nc.SetDeadline(time.Unix(1, 0)) })
	}
	err = c.roundTrip(cn, b)
	if stop != nil && !stop() {
		// The context ended during the call and cut the deadline short,
		// maybe while we finished: the connection is not reusable.
		c.discard(cn)
		if err != nil {
			return fmt.Errorf("memcached %s: %w", c.addr, context.Cause(ctx))
		}
		return nil
	}
	if err != nil {
		c.discard(cn)
		return fmt.Errorf("memcached %s: %w", c.addr, err)
	}
	c.put(cn)
	return nil
}

// roundTrip writes what cn has queued and b in one write, then reads the
// replies cn owes for earlier Sends and b's. On error cn is out of step.
func (c *Client) roundTrip(cn *conn, b *Batch) error {
	out := b.buf
	if len(cn.out) > 0 {
		cn.out = append(cn.out, b.buf...)
		out = cn.out
	}
	_, err := cn.nc.Write(out)
	cn.out = cn.out[:0]
	if err != nil {
		return err
	}
	if err := c.drain(cn); err != nil {
		return err
	}
	b.Replies = b.Replies[:0]
	for range b.n {
		r, vals, err := readReply(cn.br, b.vals)
		b.vals = vals
		if err != nil {
			b.Replies = b.Replies[:0]
			return err
		}
		b.Replies = append(b.Replies, r)
	}
	return nil
}

// drain reads the replies a connection owes for earlier Sends, one per
// command. On error the connection is out of step.
func (c *Client) drain(cn *conn) error {
	var scratch []byte
	for cn.pending > 0 {
		r, s, err := readReply(cn.br, scratch[:0])
		scratch = s
		if err != nil {
			return err
		}
		cn.pending--
		if r.Err() != nil {
			c.dropped.Add(1)
		}
	}
	return nil
}

func (c *Client) get(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		cn := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return cn, nil
	}
	c.mu.Unlock()
	d := net.Dialer{Timeout: c.dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10)}, nil
}

// put returns cn to the pool, or closes it when the pool is full. A
// connection that owes many replies, or is about to be closed, is
// flushed and drained first, so that what was queued on it is applied
// before it goes. An idle connection with queued commands writes them
// out after flushDelay.
func (c *Client) put(cn *conn) {
	if cn.pending >= maxPending {
		if c.flush(cn) != nil {
			return
		}
	}
	c.mu.Lock()
	if !c.closed.Load() && len(c.idle) < c.maxIdle {
		c.idle = append(c.idle, cn)
		if len(cn.out) > 0 {
			if cn.timer == nil {
				cn.timer = time.AfterFunc(flushDelay, func() { c.flushIdle(cn) })
			} else {
				cn.timer.Reset(flushDelay)
			}
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if c.flush(cn) == nil {
		cn.nc.Close()
	}
}

// flushIdle writes out what an idle connection has queued, unless
// someone took the connection meanwhile (and so writes it).
func (c *Client) flushIdle(cn *conn) {
	c.mu.Lock()
	i := slices.Index(c.idle, cn)
	if i < 0 {
		c.mu.Unlock()
		return
	}
	c.idle = slices.Delete(c.idle, i, i+1)
	c.mu.Unlock()
	if len(cn.out) == 0 {
		c.put(cn)
		return
	}
	cn.nc.SetDeadline(time.Now().Add(c.timeout))
	_, err := cn.nc.Write(cn.out)
	cn.out = cn.out[:0]
	if err != nil {
		c.discard(cn)
		return
	}
	c.put(cn)
}

// flush writes out what cn has queued and reads every reply it owes. On
// error it discards cn.
func (c *Client) flush(cn *conn) error {
	cn.nc.SetDeadline(time.Now().Add(c.timeout))
	if len(cn.out) > 0 {
		_, err := cn.nc.Write(cn.out)
		cn.out = cn.out[:0]
		if err != nil {
			c.discard(cn)
			return err
		}
	}
	if err := c.drain(cn); err != nil {
		c.discard(cn)
		return err
	}
	return nil
}

// discard closes a connection that is out of step; whatever it had
// queued or owed replies for is counted as dropped.
func (c *Client) discard(cn *conn) {
	if cn.timer != nil {
		cn.timer.Stop()
	}
	c.dropped.Add(int64(cn.pending))
	cn.pending = 0
	cn.out = cn.out[:0]
	cn.nc.Close()
}

// Close closes the idle connections; connections in use close when their
// call ends. Later calls return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed.Store(true)
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, cn := range idle {
		if cn.timer != nil {
			cn.timer.Stop()
		}
		if c.flush(cn) == nil {
			cn.nc.Close()
		}
	}
	return nil
}
