package admin

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/wire"
)

var pageT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pageBans are bans of addresses, networks and keys, made a minute apart
// in this order, with offences and refusals.
func pageBans() []wire.Ban {
	var bans []wire.Ban
	for i, b := range []struct {
		jail, key string
		offences  int
		refused   int64
	}{
		{"abuse", "198.51.100.10", 1, 5},
		{"abuse", "198.51.100.100", 3, 0},
		{"abuse", "198.51.100.9", 1, 40},
		{"manual", "198.51.100.9", 1, 1},
		{"abuse", "2001:db8:1:2::/64", 2, 7},
		{"abuse", "2001:db8:1:2:3::/80", 1, 0},
		{"manual", "203.0.113.0/24", 1, 2},
		{"manual", "10.0.0.0/8", 1, 0},
		{"login", "alice", 4, 9},
		{"login", "<b>bob</b>", 1, 0},
	} {
		since := pageT0.Add(time.Duration(i) * time.Minute)
		bans = append(bans, wire.Ban{Jail: b.jail, Key: b.key, Since: since, Until: since.Add(time.Hour), Offences: b.offences, Refused: b.refused})
	}
	return bans
}

func keysOf(bans []wire.Ban) string {
	var s []string
	for _, b := range bans {
		s = append(s, b.Jail+"/"+b.Key)
	}
	return strings.Join(s, " ")
}

// TestPage pages, sorts and filters bans as the dashboard asks.
func TestPage(t *testing.T) {
	tests := []struct {
		query string
		total int
		want  string
	}{
		{"", 10, "login/<b>bob</b> login/alice manual/10.0.0.0/8 manual/203.0.113.0/24 abuse/2001:db8:1:2:3::/80 " +
			"abuse/2001:db8:1:2::/64 manual/198.51.100.9 abuse/198.51.100.9 abuse/198.51.100.100 abuse/198.51.100.10"},
		{"sort=key", 10, "manual/10.0.0.0/8 abuse/198.51.100.9 manual/198.51.100.9 abuse/198.51.100.10 abuse/198.51.100.100 " +
			"manual/203.0.113.0/24 abuse/2001:db8:1:2::/64 abuse/2001:db8:1:2:3::/80 login/<b>bob</b> login/alice"},
		{"sort=refused&limit=3", 10, "abuse/198.51.100.9 login/alice abuse/2001:db8:1:2::/64"},
		{"sort=offences&limit=2&offset=1", 10, "abuse/198.51.100.100 abuse/2001:db8:1:2::/64"},
		{"sort=key&jail=manual", 3, "manual/10.0.0.0/8 manual/198.51.100.9 manual/203.0.113.0/24"},
		{"sort=key&filter=198.51.100.0/24", 4, "abuse/198.51.100.9 manual/198.51.100.9 abuse/198.51.100.10 abuse/198.51.100.100"},
		{"sort=key&filter=10.1.2.3", 1, "manual/10.0.0.0/8"},
		{"sort=key&filter=2001:db8:1:2:3:4::1", 2, "abuse/2001:db8:1:2::/64 abuse/2001:db8:1:2:3::/80"},
		{"filter=key:ALI", 1, "login/alice"},
		{"filter=<b>", 1, "login/<b>bob</b>"},
		{"sort=key&offset=20", 10, ""},
	}
	for _, tt := range tests {
		v, _ := url.ParseQuery(tt.query)
		q, err := parseBanQuery(v)
		if err != nil {
			t.Fatalf("parseBanQuery(%q): %v", tt.query, err)
		}
		p := Page(pageBans(), q)
		if got := keysOf(p.Bans); p.Total != tt.total || got != tt.want || p.All != 10 {
			t.Errorf("Page(%q) = %d of %d: %s\nwant %d of 10: %s", tt.query, p.Total, p.All, got, tt.total, tt.want)
		}
		if p.Jails["abuse"] != 5 || p.Jails["manual"] != 3 || p.Jails["login"] != 2 {
			t.Errorf("Page(%q).Jails = %v", tt.query, p.Jails)
		}
	}
	for _, bad := range []string{"sort=jail", "limit=0", "limit=501", "offset=-1", "offset=x"} {
		v, _ := url.ParseQuery(bad)
		if _, err := parseBanQuery(v); err == nil {
			t.Errorf("parseBanQuery(%q): no error", bad)
		}
	}
}

// TestGroups groups the bans of addresses and networks by /24 and /64,
// wider networks on their own, the largest groups first.
func TestGroups(t *testing.T) {
	g := Groups(pageBans(), BanQuery{Limit: DefaultBanPage})
	var got []string
	for _, x := range g.Groups {
		got = append(got, fmt.Sprintf("%s:%d:%d:%s", x.Network, x.Bans, x.Refused, strings.Join(x.Jails, ",")))
	}
	want := "198.51.100.0/24:4:46:abuse,manual 2001:db8:1:2::/64:2:7:abuse 203.0.113.0/24:1:2:manual 10.0.0.0/8:1:0:manual"
	if strings.Join(got, " ") != want || g.Total != 4 || g.Keys != 2 {
		t.Errorf("Groups = %d groups %v, %d keys\nwant 4 groups %s, 2 keys", g.Total, got, g.Keys, want)
	}
	if g := Groups(pageBans(), BanQuery{Jail: "manual", Limit: 1, Offset: 1}); g.Total != 3 || len(g.Groups) != 1 || g.Groups[0].Network != "198.51.100.0/24" {
		t.Errorf("Groups of jail manual, second page of 1 = %+v", g)
	}
	for _, tt := range []struct {
		jail, net, want string
	}{
		{"", "198.51.100.0/24", "abuse/198.51.100.10 abuse/198.51.100.100 abuse/198.51.100.9 manual/198.51.100.9"},
		{"manual", "198.51.100.0/24", "manual/198.51.100.9"},
		{"", "2001:db8:1:2::/64", "abuse/2001:db8:1:2::/64 abuse/2001:db8:1:2:3::/80"},
		{"", "10.0.0.0/16", ""}, // the /8 is wider: not within
	} {
		if got := keysOf(Within(pageBans(), tt.jail, netip.MustParsePrefix(tt.net))); got != tt.want {
			t.Errorf("Within(%q, %s) = %s, want %s", tt.jail, tt.net, got, tt.want)
		}
	}
}
