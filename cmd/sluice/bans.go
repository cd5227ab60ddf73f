package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/wire"
)

const bansHelp = `usage: sluice bans list [-json]
       sluice bans add [-jail J] [-for D] [-reason R] KEY
       sluice bans lift [-jail J] KEY
       sluice bans export -format F [-set NAME]
   each with [-server URL] [-token-file FILE] [-timeout D] ` + tlsUsage + `

Lists, adds and lifts the bans of a running sluice server through its admin
API, or exports them for a firewall. KEY is written as in the allow and
deny lists: an address, a network, or key:K for the key K (a bare word that
is no address is a key too); "list" writes keys so. Lifting a ban that is
not in force in the jail fails. The admin token comes from $SLUICE_ADMIN_TOKEN or -token-file (never
from a flag, which other users could read in the process list); the server
from -server (the admin API's URL) or $SLUICE_ADMIN.

Export formats: nftables, ipset, iptables, ip6tables, hosts.deny, pf, nginx
(the body of a geo block; nginx-map for a map on $remote_addr). Only bans
of addresses and networks are exported.

Example:

  export SLUICE_ADMIN_TOKEN=$(cat /etc/sluice/admin-token)
  sluice bans add -for 1h -reason scraping 203.0.113.7
  sluice bans list
  JAIL    KEY          LEFT   OFFENCES  REASON
  manual  203.0.113.7  59m59s 1         scraping
  sluice bans export -format nftables | nft -f -
  sluice bans lift 203.0.113.7
`

// defaultAdmin is where "sluice serve" puts the admin API by default.
const defaultAdmin = "http://" + config.DefaultAdminListen

// adminClient talks to the admin API of a server.
type adminClient struct {
	base, token string
	hc          *http.Client
}

// bansFlags are the flags of "sluice bans".
type bansFlags struct {
	base, tokenFile, jail, reason, format, set string
	dur, timeout                               time.Duration
	asJSON                                     bool
	tls                                        tlsFlags
}

// register adds the flags to fs.
func (f *bansFlags) register(fs *flag.FlagSet, warn io.Writer) {
	f.base = defaultAdmin
	if env := os.Getenv("SLUICE_ADMIN"); env != "" {
		f.base = env
	}
	fs.StringVar(&f.base, "server", f.base, "base `URL` of the server's admin API; $SLUICE_ADMIN sets the default")
	alias(fs, "admin", "server", warn)
	fs.StringVar(&f.tokenFile, "token-file", "", "read the admin token from `file` (default $SLUICE_ADMIN_TOKEN)")
	fs.StringVar(&f.jail, "jail", "manual", "the jail of the ban (add, lift)")
	fs.DurationVar(&f.dur, "for", 0, "length of the ban (add); default the jail's own")
	fs.StringVar(&f.reason, "reason", "", "why, for the list (add)")
	fs.BoolVar(&f.asJSON, "json", false, "print the list as JSON (list)")
	fs.StringVar(&f.format, "format", "", "export `format`: nftables, ipset, iptables, ip6tables, hosts.deny, pf, nginx, nginx-map")
	fs.StringVar(&f.set, "set", "sluice", "the set, table or chain the export fills")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the server")
	f.tls.register(fs, warn)
}

func runBans(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bans", flag.ContinueOnError)
	var f bansFlags
	f.register(fs, stderr)
	pos, err := parseFlags(fs, bansHelp, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(`bans: want list, add, lift or export (run "sluice bans -h")`)
	}
	sub, rest := pos[0], pos[1:]
	n, known := map[string]int{"list": 0, "export": 0, "add": 1, "lift": 1}[sub]
	if !known {
		return usageError(fmt.Sprintf("bans: unknown subcommand %q (want list, add, lift or export)", sub))
	}
	if len(rest) != n {
		return usageError(fmt.Sprintf("bans %s: want %d argument(s), got %d", sub, n, len(rest)))
	}
	ac, err := f.client()
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		return ac.list(ctx, stdout, f.asJSON)
	case "add":
		return ac.add(ctx, stdout, wire.BanRequest{Jail: f.jail, Key: rest[0], Reason: f.reason}, f.dur)
	case "lift":
		return ac.lift(ctx, stdout, f.jail, rest[0])
	default:
		return ac.export(ctx, stdout, f.format, f.set)
	}
}

// client returns the admin API's client that f describes.
func (f *bansFlags) client() (*adminClient, error) {
	token := os.Getenv("SLUICE_ADMIN_TOKEN")
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("bans: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, usageError("bans: no admin token: set $SLUICE_ADMIN_TOKEN or -token-file to the token of the server's admin.token (or admin.token_env)")
	}
	hc, err := f.tls.client(f.timeout)
	if err != nil {
		return nil, fmt.Errorf("bans: %w", err)
	}
	return &adminClient{base: strings.TrimRight(f.base, "/"), token: token, hc: hc}, nil
}

// list writes the bans in force, as a table or as JSON.
func (ac *adminClient) list(ctx context.Context, w io.Writer, asJSON bool) error {
	bans, err := ac.bans(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(w).Encode(bans)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JAIL\tKEY\tLEFT\tOFFENCES\tCOLLATERAL\tREASON")
	for _, b := range bans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", b.Jail, banEntry(b.Key), time.Until(b.Until).Round(time.Second), b.Offences, collateral(b), b.Reason)
	}
	return tw.Flush()
}

// collateral says what a ban covers beyond its offenders: "-" for none,
// else "+N addresses" or "+N /64s".
func collateral(b wire.Ban) string {
	if b.Collateral <= 0 {
		return "-"
	}
	return "+" + strconv.FormatInt(b.Collateral, 10) + " " + b.CollateralUnit
}

// add makes the ban req, for d (0: the jail's own length).
func (ac *adminClient) add(ctx context.Context, w io.Writer, req wire.BanRequest, d time.Duration) error {
	if d > 0 {
		req.Duration = d.String()
	}
	var b wire.Ban
	if err := ac.do(ctx, http.MethodPost, "/admin/api/bans", req, &b); err != nil {
		return err
	}
	fmt.Fprintf(w, "banned %s in %s until %s (offence %d)\n", banEntry(b.Key), b.Jail, b.Until.Format(time.RFC3339), b.Offences)
	return nil
}

// lift ends the ban of key in jail.
func (ac *adminClient) lift(ctx context.Context, w io.Writer, jail, key string) error {
	q := url.Values{"jail": {jail}, "key": {key}}
	if err := ac.do(ctx, http.MethodDelete, "/admin/api/bans?"+q.Encode(), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(w, "lifted the ban of %s in %s\n", key, jail)
	return nil
}

// export writes the bans in force in format, for the firewall set.
func (ac *adminClient) export(ctx context.Context, w io.Writer, format, set string) error {
	f := guard.Format(format)
	switch f {
	case "":
		return usageError("bans export: -format is required")
	case "nginx":
		f = guard.NginxGeo
	}
	bans, err := ac.bans(ctx)
	if err != nil {
		return err
	}
	gb := make([]guard.Ban, len(bans))
	for i, b := range bans {
		gb[i] = guard.Ban{Jail: b.Jail, Key: b.Key, Reason: b.Reason, Since: b.Since, Until: b.Until, Offences: b.Offences, Collateral: b.Collateral}
	}
	if err := guard.Export(w, f, gb, guard.ExportOptions{Set: set}); err != nil {
		return fmt.Errorf("bans export: %w", err)
	}
	return nil
}

func (ac *adminClient) bans(ctx context.Context) ([]wire.Ban, error) {
	var bans []wire.Ban
	err := ac.do(ctx, http.MethodGet, "/admin/api/bans", nil, &bans)
	return bans, err
}

// do sends a request with the token and decodes a JSON answer into out.
func (ac *adminClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, ac.base+path, body)
	if err != nil {
		return fmt.Errorf("bans: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+ac.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ac.hc.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("bans: no admin API at %s: is sluice serve running with an admin token (admin.token or admin.token_env in its file), and is -server or $SLUICE_ADMIN its admin listener? %w", ac.base, err)
	}
	if err != nil {
		return fmt.Errorf("bans: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("bans: reading the answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return fmt.Errorf("bans: %s %s: %s: %s", method, ac.base+path, resp.Status, e.Error)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("bans: %s answered %q: %w", ac.base+path, data, err)
		}
	}
	return nil
}

// banEntry writes a ban's key as the lists and "bans add" and "bans lift"
// read it: an address or a network as itself, any other key as "key:"
// and the key, quoted if it is not printable (a key is any bytes a
// client sent, which must not drive the terminal).
func banEntry(key string) string {
	if _, err := guard.ParsePrefix(key); err == nil {
		return key
	}
	if !strconv.CanBackquote(key) || strings.ContainsAny(key, " \t`") {
		key = strconv.Quote(key)
	}
	return "key:" + key
}
