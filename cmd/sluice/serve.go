package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/store/memory"
)

const serveHelp = `usage: sluice serve [-config FILE] [-listen ADDR] [-grpc-listen ADDR] [-grpc-headers]
                    [-admin-listen ADDR] [-watch=true] [-shutdown-timeout D]
                    [-ignore-state-file]

Serves sluice with the configuration FILE (a sluice YAML file, an
envoyproxy/ratelimit file or its config directory), or the built-in sample
rules ("sluice config sample" prints them):

  POST /v1/check, /v1/reset   the HTTP API
  GET  /v1/auth               forward-auth for nginx, Traefik and Caddy
  POST /json                  envoyproxy/ratelimit's HTTP endpoint, for its clients
  GET  /metrics               Prometheus metrics
  GET  /healthz, /readyz      the process serves; the store answers

with -grpc-listen (or the file's grpc.listen), Envoy's rate limit
service API (gRPC envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit,
its Rate Limit Quota Service, and the gRPC health service) on its own
listener, and, when the file sets
an admin token, the admin API and dashboard on their own listener
(loopback by default): /admin/. The defaults are 127.0.0.1:8080 for the
HTTP API and 127.0.0.1:8081 for the admin API; gRPC has none (these pages
use 127.0.0.1:8082). Every address is bound before any is served: one
that is taken stops sluice serve at once, naming it.

A denial on gRPC carries its wait, in seconds, in the response metadata
sluice-retry-after, for sluice's clients; -grpc-headers also adds the
RateLimit, RateLimit-Policy and Retry-After fields to Envoy's answers,
for Envoy to pass on to the client (and to /json's).

Each listener serves TLS when the file gives it a tls block (tls,
grpc.tls, admin.tls; with client_ca_file, mutual TLS). Certificates are
read again when their files change: new connections get the new one,
established ones are kept.

SIGHUP, or any change of FILE (unless -watch=false), reloads the
configuration: the rules change, the counters stay (same store); a file
that does not parse, or that changes the store or a listener, is rejected
with a log line and the configuration in force keeps serving. SIGINT or
SIGTERM stops accepting connections and finishes the requests in flight.
Logs are structured (slog text) on stderr. On Redis or memcached, the
garbage collector runs at GOGC=400 unless the GOGC variable is set; on
the memory store, under a soft memory limit of max_bytes and a quarter
more unless the GOMEMLIMIT variable is set.

Example:

  sluice serve -config sluice.yaml -listen 127.0.0.1:8080
  sluice serve -config /etc/ratelimit/config -grpc-listen 127.0.0.1:8082 -grpc-headers
  curl -s --json '{"rule":"login","key":"203.0.113.7"}' http://127.0.0.1:8080/v1/check
  kill -HUP $(pidof sluice)
`

// sharedStoreGOGC is the GOGC of sluice serve on a shared store.
const sharedStoreGOGC = 400

// tuneGC sets the collector's GOGC to sharedStoreGOGC for a shared store,
// unless the GOGC variable is set. On Redis or memcached the server's
// live heap is small (rules, connections, metrics), so Go's default
// collector runs often: GOGC=400 cut the server's CPU per request by 9%
// under gRPC load (docs/operations.md). The memory store's heap is the
// actors' state, which that would let grow fivefold; there it sets a soft
// memory limit of the store's MaxBytes and a quarter more instead
// (memory.MemoryLimit), unless the GOMEMLIMIT variable is set, so that a
// store at its cap keeps the process near MaxBytes rather than at twice
// it, where GOGC=100 alone lets the heap grow.
func tuneGC(s config.Store) {
	switch {
	case s.Shared() && os.Getenv("GOGC") == "":
		debug.SetGCPercent(sharedStoreGOGC)
	case !s.Shared() && os.Getenv("GOMEMLIMIT") == "":
		debug.SetMemoryLimit(memory.MemoryLimit(s.Memory.MaxBytes))
	}
}

// serveFlags are the flags of sluice serve.
type serveFlags struct {
	cfgPath, listen, adminListen, grpcListen string
	grpcHeaders, watch, ignoreState          bool
	grace                                    time.Duration
}

func parseServe(args []string, stdout io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.cfgPath, "config", "", "configuration `file` or directory; default the built-in sample rules")
	fs.StringVar(&f.listen, "listen", "", "`address` to listen on, host:port; port 0 picks a free one (default the config's listen, else "+config.DefaultListen+")")
	fs.StringVar(&f.adminListen, "admin-listen", "", "`address` of the admin API, when the config sets a token (default the config's admin.listen, else "+config.DefaultAdminListen+")")
	fs.StringVar(&f.grpcListen, "grpc-listen", "", "`address` of Envoy's rate limit gRPC API, host:port (default the config's grpc.listen, else none)")
	fs.BoolVar(&f.grpcHeaders, "grpc-headers", false, "add the RateLimit header fields to the answers of Envoy's API (gRPC, for Envoy to pass on, and /json)")
	fs.BoolVar(&f.watch, "watch", true, "reload the configuration when its file changes")
	fs.BoolVar(&f.ignoreState, "ignore-state-file", false, "start without reading guard.state_file (corrupt, or of another version); the first write replaces it")
	fs.DurationVar(&f.grace, "shutdown-timeout", 10*time.Second, "how long to let requests in flight finish on shutdown")
	pos, err := parseFlags(fs, serveHelp, args, stdout)
	if err == nil && len(pos) > 0 {
		err = usageError(fmt.Sprintf("serve: unexpected argument %q (the configuration goes after -config)", pos[0]))
	}
	return f, err
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServe(args, stdout)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, source, err := loadConfig(f.cfgPath)
	if err != nil {
		return err
	}
	tuneGC(cfg.Store)
	// Catch SIGHUP before anyone can know the address: until then its
	// default action would end the process.
	hup := make(chan os.Signal, 1)
	if f.cfgPath != "" {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	svc, err := server.NewService(ctx, cfg, server.Options{Logger: log, EnvoyHeaders: f.grpcHeaders, IgnoreStateFile: f.ignoreState})
	if err != nil {
		return err
	}
	defer func() {
		if err := svc.Close(); err != nil {
			log.Warn("closing the store", "err", err)
		}
	}()
	ls := &listeners{log: log, stdout: stdout, served: make(chan error, 3)}
	if err := ls.start(ctx, f, cfg, svc); err != nil {
		return errors.Join(err, ls.shutdown(ctx, f.grace))
	}
	log.Info("serving", "rules", len(cfg.Rules), "domains", len(cfg.Domains), "store", cfg.Store.Type, "config", source, "admin", cfg.Admin.Enabled(), "telemetry", cfg.Telemetry.String())
	stopReloads := reloads(ctx, f, svc, hup, log)
	defer stopReloads()
	return ls.serve(ctx, f.grace, stopReloads)
}

// listeners are the servers of sluice serve: HTTP (the service's, and
// the admin API's) and gRPC.
type listeners struct {
	log    *slog.Logger
	stdout io.Writer
	https  []*http.Server
	grpc   *grpc.Server
	served chan error // each server's Serve's return
}

// A door is one listener of sluice serve: where it listens, which
// flag and field of the configuration set that, and how it serves.
type door struct {
	name        string // in the announcement: "listening", "grpc", "admin"
	flag, field string // the flag and the configuration field of addr
	addr        string
	scheme      string // of the announced URL: "http://", "https://" or none
	serve       func(net.Listener) error
	ln          net.Listener
}

// start binds every address f and cfg name, then serves on each: a port
// that is taken, or an address that is not the machine's, stops sluice
// serve before it serves anything, with the door, its flag and its
// field named, never leaving a half-started server.
func (ls *listeners) start(ctx context.Context, f serveFlags, cfg *config.Config, svc *server.Service) error {
	var doors []*door
	d, err := ls.httpDoor("listening", cmp.Or(f.listen, cfg.Listen), cfg.TLS, svc.Handler())
	if err != nil {
		return err
	}
	d.flag, d.field = "-listen", "listen"
	doors = append(doors, d)
	if addr := cmp.Or(f.grpcListen, cfg.GRPC.Listen); addr != "" {
		d, err := ls.grpcDoor(addr, cfg.GRPC.TLS, svc)
		if err != nil {
			return err
		}
		doors = append(doors, d)
	}
	if ah := svc.AdminHandler(); ah != nil {
		d, err := ls.httpDoor("admin", cmp.Or(f.adminListen, cfg.Admin.Listen), cfg.Admin.TLS, ah)
		if err != nil {
			return err
		}
		d.flag, d.field = "-admin-listen", "admin.listen"
		// The dashboards' streams never end on their own: end them on
		// shutdown, which would otherwise wait for them.
		ls.https[len(ls.https)-1].RegisterOnShutdown(svc.Admin().Feed().Close)
		doors = append(doors, d)
	}
	for i, d := range doors {
		if err := d.listen(ctx, doors[:i]); err != nil {
			for _, o := range doors[:i] {
				o.ln.Close()
			}
			return err
		}
	}
	for _, d := range doors {
		go func() { ls.served <- d.serve(d.ln) }()
		ls.announce(d.name, d.scheme+d.ln.Addr().String())
	}
	return nil
}

// listen binds d's address; bound are the doors bound before it.
func (d *door) listen(ctx context.Context, bound []*door) error {
	for _, o := range bound {
		if o.addr == d.addr && !strings.HasSuffix(d.addr, ":0") { // port 0: each its own free port
			return fmt.Errorf("%s: %s is also the address of %s (%s): give each its own, with %s or %s", d.name, d.addr, o.name, o.field, d.flag, d.field)
		}
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", d.addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%s: %s is taken by another program (another sluice serve?): stop it, or give another address with %s or %s: %w", d.name, d.addr, d.flag, d.field, err)
	case err != nil:
		return fmt.Errorf("%s: cannot listen on %s (%s, %s): %w", d.name, d.addr, d.flag, d.field, err)
	}
	d.ln = ln
	return nil
}

// httpDoor prepares a server of h at addr, over TLS when tc is set.
func (ls *listeners) httpDoor(name, addr string, tc *config.ServerTLS, h http.Handler) (*door, error) {
	hs := server.NewHTTPServer(h, ls.log)
	d := &door{name: name, addr: addr, scheme: "http://", serve: hs.Serve}
	if tc != nil {
		t, err := server.NewTLS(*tc, server.HTTPProtos, ls.log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		hs.TLSConfig, d.scheme = t.Config(), "https://"
		d.serve = func(ln net.Listener) error { return hs.ServeTLS(ln, "", "") } // the certificate is hs.TLSConfig's
	}
	ls.https = append(ls.https, hs)
	return d, nil
}

// grpcDoor prepares the gRPC server, Envoy's rate limit API and
// sluice's own, at addr, over TLS when tc is set.
func (ls *listeners) grpcDoor(addr string, tc *config.ServerTLS, svc *server.Service) (*door, error) {
	var opts []grpc.ServerOption
	if tc != nil {
		t, err := server.NewTLS(*tc, server.GRPCProtos, ls.log)
		if err != nil {
			return nil, fmt.Errorf("grpc: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(t.Config())))
	}
	ls.grpc = envoyrls.NewServer(svc.RateLimitService(), opts...)
	svc.LimitsService().Register(ls.grpc)
	svc.LeasesService().Register(ls.grpc)
	svc.QuotaService().Register(ls.grpc)
	return &door{name: "grpc", flag: "-grpc-listen", field: "grpc.listen", addr: addr, serve: ls.grpc.Serve}, nil
}

// announce prints where a server listens, for the people and scripts
// that started sluice serve (once: the log's "serving" line does not
// repeat it).
func (ls *listeners) announce(name, addr string) {
	fmt.Fprintf(ls.stdout, "sluice: %s on %s\n", name, addr)
}

// serve waits for a server to fail or ctx to end, then shuts every
// server down (after stopping reloads), letting requests in flight
// finish within grace.
func (ls *listeners) serve(ctx context.Context, grace time.Duration, stopReloads func()) error {
	select {
	case err := <-ls.served:
		stopReloads()
		return errors.Join(fmt.Errorf("serve: %w", err), ls.shutdown(ctx, grace))
	case <-ctx.Done():
	}
	stopReloads()
	ls.log.Info("shutting down", "timeout", grace)
	if err := ls.shutdown(ctx, grace); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	n := len(ls.https)
	if ls.grpc != nil {
		n++
	}
	for range n {
		if err := <-ls.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	ls.log.Info("stopped")
	return nil
}

// shutdown stops every server, letting requests in flight finish within
// grace.
func (ls *listeners) shutdown(ctx context.Context, grace time.Duration) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	var errs []error
	if ls.grpc != nil {
		stopped := make(chan struct{})
		go func() { ls.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-sctx.Done():
			ls.grpc.Stop()
		}
	}
	for _, hs := range ls.https {
		errs = append(errs, hs.Shutdown(sctx))
	}
	return errors.Join(errs...)
}

// reloads reloads the configuration file of f on SIGHUP and, with
// f.watch, on every change of the file, one reload at a time, until the
// function it returns is called (which waits for them to stop).
func reloads(ctx context.Context, f serveFlags, svc *server.Service, hup <-chan os.Signal, log *slog.Logger) (stop func()) {
	if f.cfgPath == "" {
		return func() {}
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex // one reload at a time, from either source
	reload := func() {
		mu.Lock()
		defer mu.Unlock()
		_ = svc.ReloadFile(f.cfgPath) // logged and counted
	}
	wg.Go(func() {
		for {
			select {
			case <-rctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the configuration", "config", f.cfgPath)
				reload()
			}
		}
	})
	if f.watch {
		wg.Go(func() {
			if err := server.WatchConfig(rctx, f.cfgPath, reload); err != nil {
				log.Warn("not watching the configuration file; SIGHUP still reloads it", "err", err)
			}
		})
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// loadConfig reads the configuration at path, or the built-in sample
// rules when path is empty, and says which it used.
func loadConfig(path string) (*config.Config, string, error) {
	if path == "" {
		c, err := config.Default()
		return c, "built-in sample", err
	}
	c, err := config.Load(path)
	return c, path, err
}
