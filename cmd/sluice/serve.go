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
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/store/memory"
)

const serveHelp = `usage: sluice serve [-config FILE] [-listen ADDR] [-grpc-listen ADDR] [-admin-listen ADDR] [-watch=true] [-shutdown-timeout D]

Serves sluice with the configuration FILE (a sluice YAML file, an
envoyproxy/ratelimit file or its config directory), or the built-in sample
rules ("sluice config sample" prints them):

  POST /v1/check, /v1/reset   the HTTP API
  GET  /v1/auth               forward-auth for nginx, Traefik and Caddy
  POST /json                  envoyproxy/ratelimit's HTTP endpoint, for its clients
  GET  /metrics               Prometheus metrics
  GET  /healthz, /readyz      the process serves; the store answers

with -grpc-listen, Envoy's rate limit service API (gRPC
envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, and the gRPC
health service) on its own listener, and, when the file sets an admin
token, the admin API and dashboard on their own listener (loopback by
default): /admin/.

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
  sluice serve -config /etc/ratelimit/config -grpc-listen 127.0.0.1:8081 -admin-listen 127.0.0.1:8082
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

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration `file` or directory; default the built-in sample rules")
	listen := fs.String("listen", "", "`address` to listen on, host:port; port 0 picks a free one (default the config's listen, else "+config.DefaultListen+")")
	adminListen := fs.String("admin-listen", "", "`address` of the admin API, when the config sets a token (default the config's admin.listen, else "+config.DefaultAdminListen+")")
	grpcListen := fs.String("grpc-listen", "", "`address` of Envoy's rate limit gRPC API, host:port (default none)")
	grpcHeaders := fs.Bool("grpc-headers", false, "add the RateLimit header fields to the answers of Envoy's API (gRPC, for Envoy to pass on, and /json)")
	watch := fs.Bool("watch", true, "reload the configuration when its file changes")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "how long to let requests in flight finish on shutdown")
	pos, err := parseFlags(fs, serveHelp, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError(fmt.Sprintf("serve: unexpected argument %q (the configuration goes after -config)", pos[0]))
	}

	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, source, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	tuneGC(cfg.Store)
	addr := cmp.Or(*listen, cfg.Listen)
	// Catch SIGHUP before anyone can know the address: until then its
	// default action would end the process.
	hup := make(chan os.Signal, 1)
	if *cfgPath != "" {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	svc, err := server.NewService(ctx, cfg, server.Options{Logger: log, EnvoyHeaders: *grpcHeaders})
	if err != nil {
		return err
	}
	defer func() {
		if err := svc.Close(); err != nil {
			log.Warn("closing the store", "err", err)
		}
	}()

	var servers []*http.Server
	var gs *grpc.Server
	served := make(chan error, 3)
	start := func(name, addr string, h http.Handler) error {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		hs := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		servers = append(servers, hs)
		go func() { served <- hs.Serve(ln) }()
		fmt.Fprintf(stdout, "sluice: %s on http://%s\n", name, ln.Addr())
		log.Info("listening", "what", name, "addr", ln.Addr().String())
		return nil
	}
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *grace)
		defer cancel()
		var errs []error
		if gs != nil {
			stopped := make(chan struct{})
			go func() { gs.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-sctx.Done():
				gs.Stop()
			}
		}
		for _, hs := range servers {
			errs = append(errs, hs.Shutdown(sctx))
		}
		return errors.Join(errs...)
	}
	if err := start("listening", addr, svc.Handler()); err != nil {
		return err
	}
	if *grpcListen != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *grpcListen)
		if err != nil {
			return errors.Join(fmt.Errorf("grpc: %w", err), shutdown())
		}
		gs = envoyrls.NewServer(svc.RateLimitService())
		go func() { served <- gs.Serve(ln) }()
		fmt.Fprintf(stdout, "sluice: grpc on %s\n", ln.Addr())
		log.Info("listening", "what", "grpc", "addr", ln.Addr().String())
	}
	if ah := svc.AdminHandler(); ah != nil {
		if err := start("admin", cmp.Or(*adminListen, cfg.Admin.Listen), ah); err != nil {
			return errors.Join(err, shutdown())
		}
	}
	log.Info("serving", "rules", len(cfg.Rules), "domains", len(cfg.Domains), "store", cfg.Store.Type, "config", source, "admin", cfg.Admin.Enabled())

	var wg sync.WaitGroup
	defer wg.Wait()
	rctx, stopReloads := context.WithCancel(ctx)
	defer stopReloads()
	if *cfgPath != "" {
		var mu sync.Mutex // one reload at a time, from either source
		reload := func() {
			mu.Lock()
			defer mu.Unlock()
			_ = svc.ReloadFile(*cfgPath) // logged and counted
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-rctx.Done():
					return
				case <-hup:
					log.Info("SIGHUP: reloading the configuration", "config", *cfgPath)
					reload()
				}
			}
		}()
		if *watch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := server.WatchConfig(rctx, *cfgPath, reload); err != nil {
					log.Warn("not watching the configuration file; SIGHUP still reloads it", "err", err)
				}
			}()
		}
	}

	select {
	case err := <-served:
		stopReloads()
		return errors.Join(fmt.Errorf("serve: %w", err), shutdown())
	case <-ctx.Done():
	}
	stopReloads()
	log.Info("shutting down", "timeout", *grace)
	if err := shutdown(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	for range servers {
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	if gs != nil {
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	log.Info("stopped")
	return nil
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
