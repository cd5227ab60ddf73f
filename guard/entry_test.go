package guard_test

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

// fill adds the entries, written as ParseEntry reads them, to l.
func fill(t testing.TB, l *guard.List, entries ...string) {
	t.Helper()
	for _, s := range entries {
		e, err := guard.ParseEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		l.Add(e)
	}
}

// TestParseEntry reads entries of every form, and refuses what is none
// with an error that names it.
func TestParseEntry(t *testing.T) {
	tests := []struct {
		in   string
		want string // String of the entry; "" for an error
		net  string // its network, if it is one
	}{
		{"203.0.113.7", "203.0.113.7", "203.0.113.7/32"},
		{" 203.0.113.7 ", "203.0.113.7", "203.0.113.7/32"},
		{"203.0.113.9/24", "203.0.113.0/24", "203.0.113.0/24"},
		{"2001:db8::1", "2001:db8::1", "2001:db8::1/128"},
		{"2001:db8:1::/48", "2001:db8:1::/48", "2001:db8:1::/48"},
		{"::ffff:192.0.2.0/120", "192.0.2.0/24", "192.0.2.0/24"},
		{"::ffff:192.0.2.1", "192.0.2.1", "192.0.2.1/32"},
		{"fe80::1%eth0", "fe80::1", "fe80::1/128"},
		{"key:alice", "key:alice", ""},
		{"key:203.0.113.7", "key:203.0.113.7", ""},
		{"key:key:x", "key:key:x", ""},
		{"", "", ""},
		{"key:", "", ""},
		{"alice", "", ""},
		{"1.2.3.4/33", "", ""},
		{"::/129", "", ""},
		{"10.0.0.300", "", ""},
	}
	for _, tt := range tests {
		e, err := guard.ParseEntry(tt.in)
		if tt.want == "" {
			if err == nil || !errors.Is(err, sluice.ErrInvalidRequest) || !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
				t.Errorf("ParseEntry(%q) = %v, %v; want an invalid request naming the entry", tt.in, e, err)
			}
			continue
		}
		if err != nil || e.String() != tt.want || !e.IsValid() {
			t.Errorf("ParseEntry(%q) = %v, %v; want %s", tt.in, e, err, tt.want)
			continue
		}
		p, isNet := e.Net()
		k, isKey := e.Key()
		if isNet == isKey || isNet && p.String() != tt.net || isKey && "key:"+k != tt.want {
			t.Errorf("ParseEntry(%q): Net() = %v, %v; Key() = %q, %v; want network %q", tt.in, p, isNet, k, isKey, tt.net)
		}
		if again, err := guard.ParseEntry(e.String()); err != nil || again != e {
			t.Errorf("ParseEntry(%q) = %v, %v; want %v again", e.String(), again, err, e)
		}
	}
	if z := (guard.Entry{}); z.IsValid() || z.String() != "" || guard.KeyEntry("").IsValid() || guard.NetEntry(netip.Prefix{}).IsValid() {
		t.Error("the zero Entry, an empty key or an invalid network is a valid entry")
	}
}

// TestListEntries adds and removes entries, and lists them: networks
// sorted, then keys sorted.
func TestListEntries(t *testing.T) {
	var l guard.List
	fill(t, &l, "key:bob", "203.0.113.0/24", "198.51.100.7", "key:alice", "2001:db8::/32")
	l.Add(guard.Entry{}) // ignored
	l.Remove(guard.KeyEntry("bob"))
	l.Remove(guard.NetEntry(netip.MustParsePrefix("203.0.113.9/24")))
	var got []string
	for _, e := range l.Entries() {
		got = append(got, e.String())
	}
	if want := []string{"198.51.100.7", "2001:db8::/32", "key:alice"}; !slices.Equal(got, want) {
		t.Errorf("Entries() = %q, want %q", got, want)
	}
}
