package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/memory"
)

const serveHelp = `usage: sluice serve [-config FILE] [-listen ADDR] [-shutdown-timeout D]

Serves the HTTP API of sluice (POST /v1/check, POST /v1/reset, GET /healthz,
GET /readyz) with the rules of FILE, or the built-in sample rules ("sluice
config sample" prints them). It prints the address it listens on, logs to
stderr, and on SIGINT or SIGTERM stops accepting connections and finishes
the requests in flight.

Example:

  sluice serve -config sluice.yaml -listen 127.0.0.1:8080
  curl -s --json '{"rule":"login","key":"203.0.113.7"}' http://127.0.0.1:8080/v1/check
`

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "rules `file` (YAML); default the built-in sample rules")
	listen := fs.String("listen", "", "`address` to listen on, host:port; port 0 picks a free one (default the config's listen, else "+config.DefaultListen+")")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "how long to let requests in flight finish on shutdown")
	pos, err := parseFlags(fs, serveHelp, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError(fmt.Sprintf("serve: unexpected argument %q (the rules file goes after -config)", pos[0]))
	}

	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, source, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	addr := cfg.Listen
	if *listen != "" {
		addr = *listen
	}

	// config.Parse accepts only the memory store so far; the switch is
	// where the others will be opened.
	st := memory.New(memory.Config{})
	defer func() {
		if err := st.Close(); err != nil {
			log.Warn("closing the store", "err", err)
		}
	}()

	srv, err := server.New(server.Config{Store: st, Rules: cfg.Rules, Logger: log})
	if err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	fmt.Fprintf(stdout, "sluice: listening on http://%s\n", ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "rules", len(cfg.Rules), "store", cfg.Store.Type, "config", source)

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", *grace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// loadConfig reads the rules file at path, or the built-in sample rules
// when path is empty, and says which it used.
func loadConfig(path string) (*config.Config, string, error) {
	if path == "" {
		c, err := config.Default()
		return c, "built-in sample", err
	}
	c, err := config.Load(path)
	return c, path, err
}
