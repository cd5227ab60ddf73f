package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/wire"
)

const checkHelp = `usage: sluice check [-server URL] [-cost N] [-peek] [-json] [-timeout D]
                    ` + tlsUsage + ` RULE KEY

Asks a running sluice server whether KEY may act now under RULE, taking
-cost units (with -peek, taking nothing), and prints the answer. The exit
status is 0 when allowed, 3 when denied, 1 when the server could not be
asked or refused the request.

Example:

  sluice check -server http://127.0.0.1:8080 login 203.0.113.7 -cost 1
  allowed: login 203.0.113.7: 4 of 5/min left, full again in 12s
  sluice check -server https://sluice.internal:8443 -tls-ca ca.crt login 203.0.113.7
`

// defaultServer is the server "check" asks when neither -server nor
// SLUICE_SERVER names one: where "sluice serve" listens by default.
const defaultServer = "http://127.0.0.1:8080"

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	serverURL := defaultServer
	if env := os.Getenv("SLUICE_SERVER"); env != "" {
		serverURL = env
	}
	fs.StringVar(&serverURL, "server", serverURL, "base `URL` of the server's HTTP API; $SLUICE_SERVER sets the default")
	cost := fs.Int("cost", 1, "units the request takes")
	peek := fs.Bool("peek", false, "only report whether the request would be allowed; take nothing")
	asJSON := fs.Bool("json", false, "print the server's answer as JSON")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the server")
	var tf tlsFlags
	tf.register(fs, stderr)
	pos, err := parseFlags(fs, checkHelp, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError(fmt.Sprintf("check: want RULE and KEY, got %d arguments (run \"sluice check -h\")", len(pos)))
	}
	if *cost < 1 {
		return usageError(fmt.Sprintf("check: -cost %d must be at least 1", *cost))
	}
	req := wire.CheckRequest{Rule: pos[0], Key: pos[1], Cost: *cost, Peek: *peek}
	hc, err := tf.client(*timeout)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := postCheck(ctx, hc, serverURL, req)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(resp); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, describe(req, resp))
	}
	if !resp.Allowed {
		return errDenied
	}
	return nil
}

// postCheck asks the server at base about req, through hc.
func postCheck(ctx context.Context, hc *http.Client, base string, req wire.CheckRequest) (wire.CheckResponse, error) {
	var out wire.CheckResponse
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	url := strings.TrimRight(base, "/") + "/v1/check"
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return out, fmt.Errorf("check: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		return out, fmt.Errorf("check: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, fmt.Errorf("check: reading the answer of %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e wire.ErrorResponse
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return out, fmt.Errorf("check: %s: %s: %s", url, resp.Status, e.Error)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("check: %s answered %q: %w", url, data, err)
	}
	return out, nil
}

// describe writes a decision for a human.
func describe(req wire.CheckRequest, r wire.CheckResponse) string {
	verdict := "allowed"
	if !r.Allowed {
		verdict = "denied"
	}
	if req.Peek {
		verdict += " (peek)"
	}
	s := fmt.Sprintf("%s: %s %s: %d of %s left", verdict, r.Rule, req.Key, r.Remaining, r.Policy)
	if !r.Allowed {
		s += ", retry in " + seconds(r.RetryAfter)
	}
	return s + ", full again in " + seconds(r.ResetAfter)
}

// seconds writes a count of seconds from the API as a Go duration.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
