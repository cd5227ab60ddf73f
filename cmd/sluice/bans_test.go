package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/guard"
)

const bansToken = "bans-test-token-0123456789"

// startServeAdminWith runs "sluice serve" with an admin token and extra
// configuration on free loopback ports until the test ends, and returns
// the URLs of its API and of its admin API.
func startServeAdminWith(t *testing.T, extra string) (api, adminURL string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	conf := "rules:\n  - name: web\n    limits: [\"5/min\"]\nadmin:\n  token_env: SLUICE_TEST_ADMIN_TOKEN\n" + extra
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_TEST_ADMIN_TOKEN", bansToken)
	got, _ := serve(t, []string{"-config", path, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0"},
		"sluice: listening on ", "sluice: admin on ")
	return got[0], got[1]
}

func TestBans(t *testing.T) {
	_, adminURL := startServeAdminWith(t, "guard:\n  jails:\n    - {name: abuse, rules: [web], max_failures: 5, find_time: 1m, ban_time: 10m}\n")
	t.Setenv("SLUICE_ADMIN_TOKEN", bansToken)
	tests := []struct {
		name     string
		args     []string
		want     []string // substrings of stdout
		wantCode int
	}{
		{"add", []string{"bans", "-admin", adminURL, "add", "-for", "1h", "-reason", "scraping", "203.0.113.7"}, []string{"banned 203.0.113.7 in manual until"}, 0},
		{"add a network", []string{"bans", "-admin", adminURL, "add", "198.51.100.0/24"}, []string{"banned 198.51.100.0/24 in manual"}, 0},
		{"add a key", []string{"bans", "-admin", adminURL, "add", "user:alice"}, []string{"banned key:user:alice"}, 0},
		{"add a key as the lists write it", []string{"bans", "-admin", adminURL, "add", "key:abc123"}, []string{"banned key:abc123 in manual"}, 0},
		{"list", []string{"bans", "-admin", adminURL, "list"}, []string{"JAIL", "manual  203.0.113.7", "scraping", "key:user:alice", "key:abc123"}, 0},
		{"list json", []string{"bans", "-admin", adminURL, "list", "-json"}, []string{`"key":"abc123"`}, 0},
		{"lift a key", []string{"bans", "-admin", adminURL, "lift", "key:abc123"}, []string{"lifted the ban of key:abc123 in manual"}, 0},
		{"lift no ban", []string{"bans", "-admin", adminURL, "lift", "key:abc123"}, nil, 1},
		{"lift in the wrong jail", []string{"bans", "-admin", adminURL, "lift", "-jail", "nope", "key:user:alice"}, nil, 1},
		{"list json", []string{"bans", "-admin", adminURL, "list", "-json"}, []string{`"key":"203.0.113.7"`, `"reason":"scraping"`}, 0},
		{"nftables", []string{"bans", "-admin", adminURL, "export", "-format", "nftables"}, []string{"table inet sluice {", "\t\t\t198.51.100.0/24 timeout", "\t\t\t203.0.113.7/32 timeout 3600s", "ip saddr @banned4 drop"}, 0},
		{"ipset", []string{"bans", "-admin", adminURL, "export", "-format", "ipset", "-set", "abuse"}, []string{"add abuse4 203.0.113.7/32 timeout"}, 0},
		{"iptables", []string{"bans", "-admin", adminURL, "export", "-format", "iptables"}, []string{"-A sluice -s 203.0.113.7/32"}, 0},
		{"hosts.deny", []string{"bans", "-admin", adminURL, "export", "-format", "hosts.deny"}, []string{"ALL: 203.0.113.7", "ALL: 198.51.100.0/255.255.255.0"}, 0},
		{"pf", []string{"bans", "-admin", adminURL, "export", "-format", "pf"}, []string{"203.0.113.7/32"}, 0},
		{"nginx-geo", []string{"bans", "-admin", adminURL, "export", "-format", "nginx-geo"}, []string{"203.0.113.7/32 1;"}, 0},
		{"nginx is no format", []string{"bans", "-admin", adminURL, "export", "-format", "nginx"}, nil, 2},
		{"add in a second jail", []string{"bans", "-admin", adminURL, "add", "-jail", "abuse", "203.0.113.7"}, []string{"banned 203.0.113.7 in abuse"}, 0},
		{"status", []string{"bans", "-admin", adminURL, "status"}, []string{"JAIL", "manual", "abuse   web", "5 in 1m0s", "10m0s"}, 0},
		{"status of a jail", []string{"bans", "-admin", adminURL, "status", "abuse"}, []string{"jail:          abuse", "bans in force: 1", "banned:        203.0.113.7"}, 0},
		{"status json", []string{"bans", "-admin", adminURL, "status", "-json", "abuse"}, []string{`"banned":["203.0.113.7"]`, `"max_failures":5`}, 0},
		{"status of no jail", []string{"bans", "-admin", adminURL, "status", "nope"}, nil, 1},
		{"status of two jails", []string{"bans", "-admin", adminURL, "status", "abuse", "manual"}, nil, 2},
		{"lift from one jail", []string{"bans", "-admin", adminURL, "lift", "-jail", "abuse", "203.0.113.7"}, []string{"lifted the ban of 203.0.113.7 in abuse"}, 0},
		{"add in the second jail again", []string{"bans", "-admin", adminURL, "add", "-jail", "abuse", "203.0.113.7"}, []string{"banned 203.0.113.7 in abuse"}, 0},
		{"lift from every jail", []string{"bans", "-admin", adminURL, "lift", "203.0.113.7"}, []string{"lifted the ban of 203.0.113.7 in abuse\nlifted the ban of 203.0.113.7 in manual"}, 0},
		{"lift from every jail, none left", []string{"bans", "-admin", adminURL, "lift", "203.0.113.7"}, nil, 1},
		{"unknown format", []string{"bans", "-admin", adminURL, "export", "-format", "excel"}, nil, 2},
		{"unknown jail", []string{"bans", "-admin", adminURL, "add", "-jail", "nope", "k"}, nil, 1},
		{"no format", []string{"bans", "-admin", adminURL, "export"}, nil, 2},
		{"no key", []string{"bans", "-admin", adminURL, "add"}, nil, 2},
		{"no subcommand", []string{"bans", "-admin", adminURL}, nil, 2},
		{"bad subcommand", []string{"bans", "-admin", adminURL, "purge"}, nil, 2},
		{"no server", []string{"bans", "-admin", "http://127.0.0.1:1", "list"}, nil, 1},
	}
	for _, tt := range tests {
		out, _, err := runCmd(t, tt.args...)
		if code := exitCode(err); code != tt.wantCode {
			t.Errorf("%s: run(%q) exit %d (%v), want %d", tt.name, tt.args, code, err, tt.wantCode)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: run(%q) = %q, want it to contain %q", tt.name, tt.args, out, w)
			}
		}
	}
	out, _, _ := runCmd(t, "bans", "-admin", adminURL, "list")
	if strings.Contains(out, "203.0.113.7") {
		t.Errorf("list after lift = %q, still shows the lifted ban", out)
	}

	// A wrong token is refused, and the error says so.
	t.Setenv("SLUICE_ADMIN_TOKEN", "wrong-token-0123456789")
	if _, _, err := runCmd(t, "bans", "-admin", adminURL, "list"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("list with a wrong token = %v, want a 401 error", err)
	}
	t.Setenv("SLUICE_ADMIN_TOKEN", "")
	if _, _, err := runCmd(t, "bans", "-admin", adminURL, "list"); exitCode(err) != 2 {
		t.Errorf("list without a token = %v, want a usage error", err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(bansToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCmd(t, "bans", "-admin", adminURL, "-token-file", tokenFile, "list"); err != nil {
		t.Errorf("list with -token-file = %v", err)
	}
}

// TestBansCollateral: a ban the registry merged at capacity says, in
// the list, what it covers beyond its offenders; the others say "-".
func TestBansCollateral(t *testing.T) {
	_, adminURL := startServeAdminWith(t, "guard: {max_bans: 4, max_key_bans: 2}\n") // room for two addresses
	t.Setenv("SLUICE_ADMIN_TOKEN", bansToken)
	for _, a := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.9"} {
		if _, _, err := runCmd(t, "bans", "-admin", adminURL, "add", a); err != nil {
			t.Fatalf("add %s: %v", a, err)
		}
	}
	out, _, err := runCmd(t, "bans", "-admin", adminURL, "list")
	if err != nil {
		t.Fatal(err)
	}
	var merged, single string
	for _, line := range strings.Split(out, "\n") {
		switch f := strings.Fields(line); {
		case len(f) > 1 && f[1] == "203.0.113.0/30":
			merged = line
		case len(f) > 1 && f[1] == "203.0.113.9":
			single = line
		}
	}
	if !strings.Contains(merged, "+2 addresses") || !strings.Contains(single, " - ") || !strings.Contains(out, "COLLATERAL") {
		t.Errorf("bans list =\n%s\nwant 203.0.113.0/30 with +2 addresses, and 203.0.113.9 with -", out)
	}
	if out, _, _ := runCmd(t, "bans", "-admin", adminURL, "list", "-json"); !strings.Contains(out, `"collateral":2,"collateral_unit":"addresses"`) {
		t.Errorf("bans list -json = %s, want the collateral and its unit", out)
	}
}

// TestBansFormatNames: help, flag and errors name each export format by
// the one name that -format takes.
func TestBansFormatNames(t *testing.T) {
	out, _, _ := runCmd(t, "bans", "-h")
	_, _, err := runCmd(t, "bans", "-admin", "http://127.0.0.1:1", "export", "-format", "nginx")
	for _, f := range guard.Formats {
		if !strings.Contains(out, string(f)) || err == nil || !strings.Contains(err.Error(), string(f)) {
			t.Errorf("format %s: in help %v, in the error of -format nginx (%v) %v", f, strings.Contains(out, string(f)), err, err != nil && strings.Contains(err.Error(), string(f)))
		}
	}
	if strings.Contains(out, "nginx,") || strings.Contains(out, "nginx (") {
		t.Errorf("help names a format nginx, which -format refuses:\n%s", out)
	}
}
