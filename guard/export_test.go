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
		guard.NFTables: `# sluice bans: nft -f this file
add table inet sluice
add set inet sluice banned4 { type ipv4_addr; flags interval, timeout; }
flush set inet sluice banned4
add element inet sluice banned4 { 203.0.113.7/32 timeout 3600s }
add element inet sluice banned4 { 198.51.100.0/24 timeout 91s }
add set inet sluice banned6 { type ipv6_addr; flags interval, timeout; }
flush set inet sluice banned6
add element inet sluice banned6 { 2001:db8::1/128 timeout 60s }
add element inet sluice banned6 { 2001:db8:1::/48 timeout 60s }
`,
		guard.IPSet: `create sluice4 hash:net family inet timeout 0 -exist
flush sluice4
add sluice4 203.0.113.7/32 timeout 3600 -exist
add sluice4 198.51.100.0/24 timeout 91 -exist
create sluice6 hash:net family inet6 timeout 0 -exist
flush sluice6
add sluice6 2001:db8::1/128 timeout 60 -exist
add sluice6 2001:db8:1::/48 timeout 60 -exist
`,
		guard.IPTables: `*filter
:sluice - [0:0]
-F sluice
-A sluice -s 203.0.113.7/32 -m comment --comment "sluice ban, 3600s left" -j DROP
-A sluice -s 198.51.100.0/24 -m comment --comment "sluice ban, 91s left" -j DROP
COMMIT
`,
		guard.IPTables6: `*filter
:sluice - [0:0]
-F sluice
-A sluice -s 2001:db8::1/128 -m comment --comment "sluice ban, 60s left" -j DROP
-A sluice -s 2001:db8:1::/48 -m comment --comment "sluice ban, 60s left" -j DROP
COMMIT
`,
		guard.HostsDeny: `ALL: 203.0.113.7
ALL: 198.51.100.0/255.255.255.0
ALL: [2001:db8::1]
ALL: [2001:db8:1::]/48
`,
		guard.PF: `203.0.113.7/32
198.51.100.0/24
2001:db8::1/128
2001:db8:1::/48
`,
		guard.NginxGeo: `203.0.113.7/32 1;
198.51.100.0/24 1;
2001:db8::1/128 1;
2001:db8:1::/48 1;
`,
		guard.NginxMap: `"203.0.113.7" 1;
# 198.51.100.0/24: a network, which a map cannot match: export nginx-geo to enforce it
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
