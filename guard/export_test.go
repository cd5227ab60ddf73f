package guard_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

func TestExport(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	bans := []guard.Ban{
		{Key: "203.0.113.7", Until: now.Add(time.Hour)},
		{Key: "198.51.100.0/24", Until: now.Add(90*time.Second + time.Millisecond)},
		{Key: "2001:db8::1", Until: now.Add(time.Minute)},
		{Key: "2001:db8:1::/48", Until: now.Add(time.Minute)},
		{Key: "hashed-username", Until: now.Add(time.Hour)}, // not an address: skipped
		{Key: "192.0.2.1", Until: now},                      // lapsed: skipped
	}
	want := map[guard.Format]string{
		guard.NFTables: `# sluice bans: nft -f this file. It replaces table inet sluice: the sets of the
# banned networks and the chain that drops their sources on input.
table inet sluice
delete table inet sluice
table inet sluice {
	set banned4 {
		type ipv4_addr
		flags interval, timeout
		elements = {
			198.51.100.0/24 timeout 91s,
			203.0.113.7/32 timeout 3600s
		}
	}
	set banned6 {
		type ipv6_addr
		flags interval, timeout
		elements = {
			2001:db8::1/128 timeout 60s,
			2001:db8:1::/48 timeout 60s
		}
	}
	chain input {
		type filter hook input priority filter - 10; policy accept;
		ip saddr @banned4 drop
		ip6 saddr @banned6 drop
	}
}
`,
		guard.IPSet: `# sluice bans: ipset restore < this file. Then drop the sets' sources, once, with
#   iptables -C INPUT -m set --match-set sluice4 src -j DROP || iptables -I INPUT -m set --match-set sluice4 src -j DROP
#   ip6tables -C INPUT -m set --match-set sluice6 src -j DROP || ip6tables -I INPUT -m set --match-set sluice6 src -j DROP
create sluice4 hash:net family inet timeout 0 -exist
flush sluice4
add sluice4 198.51.100.0/24 timeout 91 -exist
add sluice4 203.0.113.7/32 timeout 3600 -exist
create sluice6 hash:net family inet6 timeout 0 -exist
flush sluice6
add sluice6 2001:db8::1/128 timeout 60 -exist
add sluice6 2001:db8:1::/48 timeout 60 -exist
`,
		guard.IPTables: `# sluice bans: iptables-restore --noflush < this file. It fills chain sluice,
# which drops the banned sources. Then jump to it from INPUT, once, with
#   iptables -C INPUT -j sluice || iptables -I INPUT -j sluice
*filter
:sluice - [0:0]
-F sluice
-A sluice -s 198.51.100.0/24 -m comment --comment "sluice ban, 91s left" -j DROP
-A sluice -s 203.0.113.7/32 -m comment --comment "sluice ban, 3600s left" -j DROP
COMMIT
`,
		guard.IPTables6: `# sluice bans: ip6tables-restore --noflush < this file. It fills chain sluice,
# which drops the banned sources. Then jump to it from INPUT, once, with
#   ip6tables -C INPUT -j sluice || ip6tables -I INPUT -j sluice
*filter
:sluice - [0:0]
-F sluice
-A sluice -s 2001:db8::1/128 -m comment --comment "sluice ban, 60s left" -j DROP
-A sluice -s 2001:db8:1::/48 -m comment --comment "sluice ban, 60s left" -j DROP
COMMIT
`,
		guard.HostsDeny: `ALL: 198.51.100.0/255.255.255.0
ALL: 203.0.113.7
ALL: [2001:db8::1]
ALL: [2001:db8:1::]/48
`,
		guard.PF: `198.51.100.0/24
203.0.113.7/32
2001:db8::1/128
2001:db8:1::/48
`,
		guard.NginxGeo: `198.51.100.0/24 1;
203.0.113.7/32 1;
2001:db8::1/128 1;
2001:db8:1::/48 1;
`,
		guard.NginxMap: `# 198.51.100.0/24: a network, which a map cannot match: export nginx-geo to enforce it
"203.0.113.7" 1;
"2001:db8::1" 1;
# 2001:db8:1::/48: a network, which a map cannot match: export nginx-geo to enforce it
`,
	}
	for _, f := range guard.Formats {
		var b strings.Builder
		if err := guard.Export(&b, f, bans, guard.ExportOptions{Now: now}); err != nil {
			t.Fatalf("Export(%s): %v", f, err)
		}
		if b.String() != want[f] {
			t.Errorf("Export(%s) =\n%s\nwant\n%s", f, b.String(), want[f])
		}
	}
	for _, o := range []guard.ExportOptions{{Set: "x; rm -rf /"}, {Set: strings.Repeat("a", 29)}} {
		if err := guard.Export(&strings.Builder{}, guard.PF, bans, o); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("Export with set %q: err = %v, want ErrInvalidRequest", o.Set, err)
		}
	}
	if err := guard.Export(&strings.Builder{}, "cisco", bans, guard.ExportOptions{}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("Export(cisco): err = %v, want ErrInvalidRequest", err)
	}
}

// TestExportNested: a network banned within another, and one banned by
// two jails, are each dropped for as long as their own ban lasts: nft's
// interval sets, which refuse overlapping elements, get ranges that do
// not overlap, each with the longest timeout that holds it; the other
// formats list each network once, for its longest ban.
func TestExportNested(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ban := func(key string, d time.Duration) guard.Ban { return guard.Ban{Key: key, Until: now.Add(d)} }
	tests := []struct {
		name string
		bans []guard.Ban
		want string // the elements of banned4, or "" for none
	}{
		{"none", nil, ""},
		{"apart", []guard.Ban{ban("192.0.2.1", time.Minute), ban("192.0.2.3", time.Hour)},
			"192.0.2.1/32 timeout 60s, 192.0.2.3/32 timeout 3600s"},
		{"side by side, one timeout", []guard.Ban{ban("192.0.2.0", time.Minute), ban("192.0.2.1", time.Minute)},
			"192.0.2.0/31 timeout 60s"},
		{"within, shorter", []guard.Ban{ban("192.0.2.0/24", time.Hour), ban("192.0.2.7", time.Minute)},
			"192.0.2.0/24 timeout 3600s"},
		{"within, longer", []guard.Ban{ban("192.0.2.0/24", time.Minute), ban("192.0.2.7", time.Hour)},
			"192.0.2.0-192.0.2.6 timeout 60s, 192.0.2.7/32 timeout 3600s, 192.0.2.8-192.0.2.255 timeout 60s"},
		{"two jails", []guard.Ban{ban("192.0.2.7", time.Minute), ban("192.0.2.7", time.Hour)},
			"192.0.2.7/32 timeout 3600s"},
		{"three deep", []guard.Ban{ban("10.0.0.0/8", time.Minute), ban("10.1.0.0/16", 2*time.Minute), ban("10.1.2.0/24", time.Minute),
			ban("10.1.2.3", 3*time.Minute)},
			"10.0.0.0/16 timeout 60s, 10.1.0.0-10.1.2.2 timeout 120s, 10.1.2.3/32 timeout 180s, " +
				"10.1.2.4-10.1.255.255 timeout 120s, 10.2.0.0-10.255.255.255 timeout 60s"},
		{"the last address", []guard.Ban{ban("255.255.255.0/24", time.Minute), ban("255.255.255.255", time.Hour)},
			"255.255.255.0-255.255.255.254 timeout 60s, 255.255.255.255/32 timeout 3600s"},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := guard.Export(&b, guard.NFTables, tt.bans, guard.ExportOptions{Now: now}); err != nil {
			t.Fatal(err)
		}
		if got := nftElements(b.String(), "banned4"); got != tt.want {
			t.Errorf("%s: nftables elements of banned4 = %q, want %q", tt.name, got, tt.want)
		}
	}
	var b strings.Builder
	if err := guard.Export(&b, guard.IPSet, []guard.Ban{ban("192.0.2.7", time.Minute), ban("192.0.2.7", time.Hour), ban("192.0.2.0/24", time.Minute)},
		guard.ExportOptions{Now: now}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); strings.Count(got, "192.0.2.7/32") != 1 || !strings.Contains(got, "add sluice4 192.0.2.7/32 timeout 3600 -exist") {
		t.Errorf("ipset of a network banned by two jails, within another:\n%s\nwant it once, for the longer ban", got)
	}
}

// nftElements returns the elements of set in an nft script, on one line.
func nftElements(script, set string) string {
	_, rest, ok := strings.Cut(script, "set "+set+" {")
	if !ok {
		return "no set " + set
	}
	body, _, _ := strings.Cut(rest, "\n\t}")
	_, elems, ok := strings.Cut(body, "elements = {")
	if !ok {
		return ""
	}
	elems, _, _ = strings.Cut(elems, "}")
	return strings.Join(strings.Fields(elems), " ")
}
