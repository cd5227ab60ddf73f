package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/wire"
)

const bansHelp = `usage: sluice bans list [-json]
       sluice bans status [-json] [JAIL]
       sluice bans add [-jail J] [-for D] [-reason R] KEY
       sluice bans lift [-jail J] KEY
       sluice bans export -format F [-set NAME]
   each with [-server URL] [-token-file FILE] [-timeout D] ` + tlsUsage + `

Lists, adds and lifts the bans of a running sluice server through its admin
API, tells each jail's counts, or exports the bans for a firewall. KEY is
written as in the allow and deny lists: an address, a network, or key:K for
the key K (a bare word that is no address is a key too); "list" writes keys
so. "add" bans in jail manual unless -jail names another; "lift" lifts KEY's
bans in every jail, as fail2ban's unbanip does, or in -jail alone, and
fails when there is none. "status" writes each jail's settings, bans in
force, requests they refused and bans made; "status JAIL" that jail's and
its banned keys. The admin token comes from $SLUICE_ADMIN_TOKEN or
-token-file (never from a flag, which other users could read in the process
list); the server from -server (the admin API's URL) or $SLUICE_ADMIN.

Export formats:
  %s
(nginx-geo: the body of a geo block; nginx-map: of a map on $remote_addr).
Only bans of addresses and networks are exported.

Example:

  export SLUICE_ADMIN_TOKEN=$(cat /etc/sluice/admin-token)
  sluice bans add -for 1h -reason scraping 203.0.113.7
  sluice bans list
  JAIL    KEY          LEFT   OFFENCES  REASON
  manual  203.0.113.7  59m59s 1         scraping
  sluice bans export -format nftables | nft -f -
  sluice bans status abuse
  sluice bans lift 203.0.113.7     # from every jail
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
	fs.StringVar(&f.jail, "jail", "", "the jail of the ban (add: default manual; lift: default every jail)")
	fs.DurationVar(&f.dur, "for", 0, "length of the ban (add); default the jail's own")
	fs.StringVar(&f.reason, "reason", "", "why, for the list (add)")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON (list, status)")
	fs.StringVar(&f.format, "format", "", "export `format`: "+guard.FormatNames())
	fs.StringVar(&f.set, "set", "sluice", "the set, table or chain the export fills")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the server")
	f.tls.register(fs, warn)
}

func runBans(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bans", flag.ContinueOnError)
	var f bansFlags
	f.register(fs, stderr)
	pos, err := parseFlags(fs, fmt.Sprintf(bansHelp, guard.FormatNames()), args, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(`bans: want list, status, add, lift or export (run "sluice bans -h")`)
	}
	sub, rest := pos[0], pos[1:]
	n, known := map[string][2]int{"list": {0, 0}, "export": {0, 0}, "status": {0, 1}, "add": {1, 1}, "lift": {1, 1}}[sub]
	if !known {
		return usageError(fmt.Sprintf("bans: unknown subcommand %q (want list, status, add, lift or export)", sub))
	}
	if len(rest) < n[0] || len(rest) > n[1] {
		return usageError(fmt.Sprintf("bans %s: want %d argument(s), got %d", sub, n[1], len(rest)))
	}
	format, err := f.exportFormat(sub)
	if err != nil {
		return err
	}
	ac, err := f.client()
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		return ac.list(ctx, stdout, f.asJSON)
	case "status":
		return ac.status(ctx, stdout, strings.Join(rest, ""), f.asJSON)
	case "add":
		return ac.add(ctx, stdout, wire.BanRequest{Jail: cmp.Or(f.jail, "manual"), Key: rest[0], Reason: f.reason}, f.dur)
	case "lift":
		return ac.lift(ctx, stdout, f.jail, rest[0])
	default:
		return ac.export(ctx, stdout, format, f.set)
	}
}

// exportFormat reads -format for the subcommand sub: required by export,
// one of guard.Formats by its one name, checked before the server is
// asked.
func (f *bansFlags) exportFormat(sub string) (guard.Format, error) {
	if sub != "export" {
		return "", nil
	}
	if f.format == "" {
		return "", usageError("bans export: -format is required (" + guard.FormatNames() + ")")
	}
	format, err := guard.ParseFormat(f.format)
	if err != nil {
		return "", usageError("bans export: " + err.Error())
	}
	return format, nil
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

// lift ends the ban of key in jail, or in every jail when jail is "".
func (ac *adminClient) lift(ctx context.Context, w io.Writer, jail, key string) error {
	if jail != "" {
		q := url.Values{"jail": {jail}, "key": {key}}
		if err := ac.do(ctx, http.MethodDelete, "/admin/api/bans?"+q.Encode(), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(w, "lifted the ban of %s in %s\n", key, jail)
		return nil
	}
	var out struct {
		Lifted []wire.Ban `json:"lifted"`
	}
	if err := ac.do(ctx, http.MethodDelete, "/admin/api/bans?"+url.Values{"key": {key}}.Encode(), nil, &out); err != nil {
		return err
	}
	for _, b := range out.Lifted {
		fmt.Fprintf(w, "lifted the ban of %s in %s\n", key, b.Jail)
	}
	return nil
}

// export writes the bans in force in format f, for the firewall set.
func (ac *adminClient) export(ctx context.Context, w io.Writer, f guard.Format, set string) error {
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

// status writes each jail's settings and counts, or those of jail and
// its banned keys, as a table or as JSON.
func (ac *adminClient) status(ctx context.Context, w io.Writer, jail string, asJSON bool) error {
	var jails []admin.JailView
	if err := ac.do(ctx, http.MethodGet, "/admin/api/jails", nil, &jails); err != nil {
		return err
	}
	if jail != "" {
		return ac.jailStatus(ctx, w, jails, jail, asJSON)
	}
	if asJSON {
		return json.NewEncoder(w).Encode(jails)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JAIL\tRULES\tBANS\tREFUSED\tBANS MADE\tBANS AFTER\tBAN TIME\tSTRIKES LOST")
	for _, j := range jails {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", j.Name, cmp.Or(strings.Join(j.Rules, ","), "-"), j.Bans, j.Refused, j.BansMade,
			banAfter(j), cmp.Or(j.BanTime, "-"), strikesLost(j))
	}
	return tw.Flush()
}

// jailStatus writes the status of the jail named name, with its banned
// keys.
func (ac *adminClient) jailStatus(ctx context.Context, w io.Writer, jails []admin.JailView, name string, asJSON bool) error {
	i := slices.IndexFunc(jails, func(j admin.JailView) bool { return j.Name == name })
	if i < 0 {
		names := make([]string, len(jails))
		for k, j := range jails {
			names[k] = j.Name
		}
		return fmt.Errorf("bans status: no jail %q (the jails: %s)", name, strings.Join(names, ", "))
	}
	bans, err := ac.bans(ctx)
	if err != nil {
		return err
	}
	j, keys := jails[i], []string{}
	for _, b := range bans {
		if b.Jail == name {
			keys = append(keys, banEntry(b.Key))
		}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(struct {
			admin.JailView
			Banned []string `json:"banned"`
		}{j, keys})
	}
	fmt.Fprintf(w, "jail:          %s\nrules:         %s\nbans after:    %s\nban time:      %s\n", j.Name, cmp.Or(strings.Join(j.Rules, ", "), "-"), banAfter(j), banTime(j))
	fmt.Fprintf(w, "bans in force: %d\nrefused:       %d\nbans made:     %d (since the server started)\nstrikes lost:  %s\nbanned:        %s\n",
		j.Bans, j.Refused, j.BansMade, strikesLost(j), strings.Join(keys, " "))
	return nil
}

// banAfter says when a jail bans: "5 in 1m0s", or "-" for the manual jail.
func banAfter(j admin.JailView) string {
	if j.MaxFailures == 0 {
		return "-"
	}
	return fmt.Sprintf("%d in %s", j.MaxFailures, j.FindTime)
}

// banTime says how long a jail bans, how it grows and its jitter.
func banTime(j admin.JailView) string {
	if j.BanTime == "" {
		return "- (as asked)"
	}
	return fmt.Sprintf("%s, ×%g an offence up to %s, +%g%% jitter", j.BanTime, j.Growth, j.MaxBanTime, j.Jitter*100)
}

// strikesLost writes the strikes a jail could not count, by reason.
func strikesLost(j admin.JailView) string {
	if len(j.StrikesLost) == 0 {
		return "none"
	}
	var s []string
	for why, n := range j.StrikesLost {
		s = append(s, fmt.Sprintf("%d %s", n, why))
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}
