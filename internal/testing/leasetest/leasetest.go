// Package leasetest checks a sluice.LeaseStore across OS processes: the
// test binary re-executes itself as holder processes, each running many
// goroutines that acquire, hold and release leases on one key, while an
// independent observer in the parent counts the holders.
//
// The observer listens on a unix socket. A holder sends "+" once its lease
// is granted, and "-" before releasing it, waiting for the observer's
// acknowledgement before it releases. So every holder the observer counts
// holds a lease at that moment, and the most it ever counts is a lower
// bound of the most leases held at once: above the limit, the store
// over-admitted.
package leasetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Env holds the parameters of a holder process: observer address, key
// prefix, mode ("hold" or "crash"), limit, goroutines, rounds, TTL.
const Env = "SLUICE_LEASETEST"

// An Observer counts the holders that announced themselves.
type Observer struct {
	ln       net.Listener
	mu       sync.Mutex
	cur, max int
	granted  int
	changed  chan struct{} // closed and replaced on every change
}

// NewObserver starts an Observer, stopped when t ends.
func NewObserver(t testing.TB) *Observer {
	t.Helper()
	dir, err := os.MkdirTemp("", "leasetest")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "obs.sock"))
	if err != nil {
		t.Fatal(err)
	}
	o := &Observer{ln: ln, changed: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); os.RemoveAll(dir) })
	go o.serve()
	return o
}

func (o *Observer) serve() {
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		go o.handle(c)
	}
}

func (o *Observer) handle(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		b, err := r.ReadByte()
		if err != nil {
			return
		}
		o.mu.Lock()
		switch b {
		case '+':
			o.cur++
			o.granted++
			o.max = max(o.max, o.cur)
		case '-':
			o.cur--
		}
		close(o.changed)
		o.changed = make(chan struct{})
		o.mu.Unlock()
		if b == '-' {
			if _, err := c.Write([]byte{'k'}); err != nil {
				return
			}
		}
	}
}

// Addr returns the observer's unix socket path.
func (o *Observer) Addr() string { return o.ln.Addr().String() }

// Counts returns the holders counted now, the most counted at once and
// the grants announced so far.
func (o *Observer) Counts() (cur, most, granted int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cur, o.max, o.granted
}

// WaitGranted waits until n grants were announced, or d passes.
func (o *Observer) WaitGranted(n int, d time.Duration) bool {
	deadline := time.After(d)
	for {
		o.mu.Lock()
		ok, ch := o.granted >= n, o.changed
		o.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// Params are what a holder process does.
type Params struct {
	Addr, Prefix, Mode        string
	Limit, Goroutines, Rounds int
	TTL                       time.Duration
}

func (p Params) env() string {
	return strings.Join([]string{p.Addr, p.Prefix, p.Mode, strconv.Itoa(p.Limit), strconv.Itoa(p.Goroutines),
		strconv.Itoa(p.Rounds), p.TTL.String()}, "|")
}

// Start starts a holder process: this test binary running test (a test
// function that calls Holder), with env added to its environment.
func Start(t testing.TB, test string, p Params, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), env...), Env+"="+p.env())
	out := new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, out
}

// Processes runs procs holder processes of p and checks, with the
// observer, that no more than p.Limit held leases at once and that every
// round of every goroutine was granted.
func Processes(t *testing.T, test string, procs int, p Params, env ...string) {
	t.Helper()
	o := NewObserver(t)
	p.Addr, p.Mode = o.Addr(), "hold"
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmds[i], outs[i] = Start(t, test, p, env...)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("holder process %d: %v\n%s", i, err, outs[i])
		}
	}
	cur, most, granted := o.Counts()
	t.Logf("%d processes × %d goroutines × %d rounds: %d granted, at most %d held at once (limit %d)",
		procs, p.Goroutines, p.Rounds, granted, most, p.Limit)
	if most > p.Limit || cur != 0 {
		t.Errorf("the observer counted up to %d holders at once, limit %d (%d at the end, want 0)", most, p.Limit, cur)
	}
	if want := procs * p.Goroutines * p.Rounds; granted != want {
		t.Errorf("%d grants announced, want %d", granted, want)
	}
	if most < 2 {
		t.Errorf("at most %d held at once: the test did not overlap holders", most)
	}
}

// Crash starts one holder process that takes every place of p.Limit with
// leases of p.TTL and is then killed with SIGKILL. It checks that the
// places stay taken just after the kill, and are granted again within
// the TTL (plus a second of slack for scheduling and polling) after it.
func Crash(t *testing.T, test string, c *sluice.Concurrency, key string, p Params, env ...string) {
	t.Helper()
	o := NewObserver(t)
	p.Addr, p.Mode = o.Addr(), "crash"
	start := time.Now()
	cmd, out := Start(t, test, p, env...)
	if !o.WaitGranted(p.Limit, 30*time.Second) {
		t.Fatalf("the holder did not take its %d leases\n%s", p.Limit, out)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if l, err := c.Acquire(t.Context(), key, sluice.ClassCritical); err != nil || l.Allowed {
		t.Fatalf("Acquire just after the kill = %+v, %v; want refused: the dead holder's leases are live", l, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), p.TTL+5*time.Second)
	defer cancel()
	l, err := c.Wait(ctx, key, sluice.ClassCritical)
	if err != nil || !l.Allowed {
		t.Fatalf("Wait after the kill = %+v, %v; want granted once the leases expire", l, err)
	}
	granted := time.Now()
	t.Logf("leases of %v taken within %v of the start; killed, a place granted %v after the kill",
		p.TTL, killed.Sub(start), granted.Sub(killed))
	if granted.Sub(killed) > p.TTL+time.Second {
		t.Errorf("granted %v after the kill, want within the TTL %v (+1s slack)", granted.Sub(killed), p.TTL)
	}
	_ = l.Release(t.Context())
}

// Holder is the body of a holder process, on store: it does nothing unless
// Start started it (Env set), and reports whether it ran.
func Holder(t *testing.T, store sluice.LeaseStore) bool {
	p, ok, err := FromEnv()
	if !ok {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := sluice.NewConcurrency(store, sluice.ConcurrencyConfig{Limit: p.Limit, TTL: p.TTL, Namespace: p.Prefix, Poll: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode == "crash" {
		crash(t, c, p)
		return true
	}
	var wg sync.WaitGroup
	for range p.Goroutines {
		wg.Go(func() {
			if err := hold(c, p); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return true
}

// Announce is a holder's connection to the observer.
type Announce struct {
	conn net.Conn
	ack  [1]byte
}

// Dial connects a holder to the observer at addr.
func Dial(addr string) (*Announce, error) {
	c, err := net.Dial("unix", addr)
	if err != nil {
		return nil, err
	}
	return &Announce{conn: c}, nil
}

// Granted announces a lease granted.
func (a *Announce) Granted() error {
	_, err := a.conn.Write([]byte{'+'})
	return err
}

// Releasing announces a lease about to be released, and returns once the
// observer has counted it: only then may the holder release.
func (a *Announce) Releasing() error {
	if _, err := a.conn.Write([]byte{'-'}); err != nil {
		return err
	}
	_, err := a.conn.Read(a.ack[:])
	return err
}

// Close closes the connection.
func (a *Announce) Close() error { return a.conn.Close() }

// hold runs the rounds of one goroutine on its own connection to the
// observer. The work while holding is a millisecond's sleep: a holder
// doing I/O, long enough for holders of every process to overlap.
func hold(c *sluice.Concurrency, p Params) error {
	a, err := Dial(p.Addr)
	if err != nil {
		return err
	}
	defer a.Close()
	for range p.Rounds {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		l, err := c.Wait(ctx, "one", sluice.ClassCritical)
		cancel()
		if err != nil || !l.Allowed {
			return fmt.Errorf("wait: %+v, %v", l, err)
		}
		if err := a.Granted(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
		if err := a.Releasing(); err != nil {
			return err
		}
		if err := l.Release(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// crash takes every place and announces it, then waits to be killed.
func crash(t *testing.T, c *sluice.Concurrency, p Params) {
	a, err := Dial(p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for range p.Limit {
		l, err := c.Acquire(context.Background(), "one", sluice.ClassCritical)
		if err != nil || !l.Allowed {
			t.Fatalf("acquire: %+v, %v", l, err)
		}
		if err := a.Granted(); err != nil {
			t.Fatal(err)
		}
	}
	select {} // until SIGKILL
}

// FromEnv returns the Params of a holder process that Start started, and
// false in any other process.
func FromEnv() (Params, bool, error) {
	env := os.Getenv(Env)
	if env == "" {
		return Params{}, false, nil
	}
	p, err := parse(env)
	return p, true, err
}

func parse(env string) (Params, error) {
	f := strings.Split(env, "|")
	if len(f) != 7 {
		return Params{}, fmt.Errorf("%s=%q: want 7 fields", Env, env)
	}
	p := Params{Addr: f[0], Prefix: f[1], Mode: f[2]}
	var err error
	for i, dst := range []*int{&p.Limit, &p.Goroutines, &p.Rounds} {
		if *dst, err = strconv.Atoi(f[3+i]); err != nil {
			return p, err
		}
	}
	p.TTL, err = time.ParseDuration(f[6])
	return p, err
}
