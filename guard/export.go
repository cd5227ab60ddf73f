package guard

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Format names a firewall or edge format that Export writes.
type Format string

// The formats Export writes. Each output replaces the whole set it
// manages, so a cron job can apply it again and again; an export of no
// bans is a valid empty set, which lifts what the previous one banned.
// Where one ban's network lies within another's, the firewall still
// drops each for as long as its own ban lasts.
const (
	// NFTables is an `nft -f` script, complete on its own: it replaces
	// table inet <Set> (atomically, in one transaction) with the sets
	// banned4 and banned6, with timeouts, and the chain input hooked on
	// input (priority filter - 10, before the usual filter chains) that
	// drops the sources in either set. The table is sluice's alone:
	// applying it touches no other.
	NFTables Format = "nftables"
	// IPSet is an `ipset restore` script filling the sets <Set>4 and
	// <Set>6 (hash:net), with timeouts. ipset holds sets only: its
	// header gives the two rules, iptables and ip6tables, that drop their
	// sources, to add once after the first restore.
	IPSet Format = "ipset"
	// IPTables is an `iptables-restore --noflush` script filling the chain
	// <Set> of the filter table with a rule that drops each banned IPv4
	// network (ip6tables gets IPTables6). A restore cannot add a rule
	// only when it is missing, so its header gives the jump from INPUT to
	// add once, after the first restore (`iptables -C INPUT -j sluice ||
	// iptables -I INPUT -j sluice`). iptables keeps no timeouts: apply it
	// again to end bans.
	IPTables Format = "iptables"
	// IPTables6 is IPTables for ip6tables-restore.
	IPTables6 Format = "ip6tables"
	// HostsDeny is a /etc/hosts.deny fragment (TCP wrappers): ALL: host.
	HostsDeny Format = "hosts.deny"
	// PF is a pf table file, one network a line: pfctl -t <Set> -T replace
	// -f file.
	PF Format = "pf"
	// NginxGeo is the body of an nginx geo block: `geo $banned { default
	// 0; include this_file; }`.
	NginxGeo Format = "nginx-geo"
	// NginxMap is the body of an nginx map block on $remote_addr; it
	// holds single addresses only (map cannot match networks): each
	// network ban is a comment line saying so. Prefer NginxGeo.
	NginxMap Format = "nginx-map"
)

// Formats lists every Format.
var Formats = []Format{NFTables, IPSet, IPTables, IPTables6, HostsDeny, PF, NginxGeo, NginxMap}

// ParseFormat returns the Format named name, or an error wrapping
// sluice.ErrInvalidRequest that lists the names.
func ParseFormat(name string) (Format, error) {
	if _, ok := exporters[Format(name)]; !ok {
		return "", fmt.Errorf("%w: guard: unknown export format %q (want %s)", sluice.ErrInvalidRequest, name, FormatNames())
	}
	return Format(name), nil
}

// FormatNames lists the names of the formats, as ParseFormat reads them:
// "nftables, ipset, …".
func FormatNames() string {
	s := make([]string, len(Formats))
	for i, f := range Formats {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// ExportOptions configure Export. The zero value means defaults.
type ExportOptions struct {
	// Set names the set, table or chain the output fills. Default
	// "sluice". Letters, digits, '_' and '-' only.
	Set string
	// Now is the time timeouts are counted from. Default time.Now().
	Now time.Time
}

// Export writes the bans whose key is an address or a network (ban keys
// that are usernames are skipped) in format f, for a cron job or the CLI
// to apply. Lapsed bans are left out; timeouts are rounded up to whole
// seconds; a network banned twice (by two jails) is written once, for
// the longer ban. Errors wrap sluice.ErrInvalidRequest for a bad format
// or set name, or are w's.
func Export(w io.Writer, f Format, bans []Ban, o ExportOptions) error {
	if o.Set == "" {
		o.Set = "sluice"
	}
	for _, c := range o.Set {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') || len(o.Set) > 28 {
			return fmt.Errorf("%w: guard: export set name %q", sluice.ErrInvalidRequest, o.Set)
		}
	}
	if _, err := ParseFormat(string(f)); err != nil {
		return err
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	v4, v6 := exportEntries(bans, o.Now)
	bw := bufio.NewWriter(w)
	exporters[f](func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }, o.Set, v4, v6)
	return bw.Flush()
}

// An exportEntry is a banned address or network, and the whole seconds
// its ban has left.
type exportEntry struct {
	p       netip.Prefix
	timeout int64
}

// exportEntries returns the bans in force at now whose keys are
// addresses or networks, IPv4 and IPv6 apart, each network once (with
// the longest timeout), in address order, wider networks first.
func exportEntries(bans []Ban, now time.Time) (v4, v6 []exportEntry) {
	longest := map[netip.Prefix]int64{}
	for _, b := range bans {
		p, err := ParsePrefix(b.Key)
		left := b.Until.Sub(now)
		if err != nil || left <= 0 {
			continue
		}
		longest[p] = max(longest[p], int64((left+time.Second-1)/time.Second))
	}
	for p, t := range longest {
		if p.Addr().Is4() {
			v4 = append(v4, exportEntry{p, t})
		} else {
			v6 = append(v6, exportEntry{p, t})
		}
	}
	byAddr := func(a, b exportEntry) int {
		if c := a.p.Addr().Compare(b.p.Addr()); c != 0 {
			return c
		}
		return a.p.Bits() - b.p.Bits()
	}
	slices.SortFunc(v4, byAddr)
	slices.SortFunc(v6, byAddr)
	return v4, v6
}

// exporters write the entries of each format, with p, for the set.
var exporters = map[Format]func(p func(string, ...any), set string, v4, v6 []exportEntry){
	NFTables: nftables,
	IPSet: func(p func(string, ...any), set string, v4, v6 []exportEntry) {
		p("# sluice bans: ipset restore < this file. Then drop the sets' sources, once, with\n")
		p("#   iptables -C INPUT -m set --match-set %[1]s4 src -j DROP || iptables -I INPUT -m set --match-set %[1]s4 src -j DROP\n", set)
		p("#   ip6tables -C INPUT -m set --match-set %[1]s6 src -j DROP || ip6tables -I INPUT -m set --match-set %[1]s6 src -j DROP\n", set)
		for _, fam := range []struct {
			suffix, family string
			es             []exportEntry
		}{{"4", "inet", v4}, {"6", "inet6", v6}} {
			p("create %s%s hash:net family %s timeout 0 -exist\n", set, fam.suffix, fam.family)
			p("flush %s%s\n", set, fam.suffix)
			for _, e := range fam.es {
				p("add %s%s %s timeout %d -exist\n", set, fam.suffix, e.p, e.timeout)
			}
		}
	},
	IPTables:  func(p func(string, ...any), set string, v4, _ []exportEntry) { iptables(p, "iptables", set, v4) },
	IPTables6: func(p func(string, ...any), set string, _, v6 []exportEntry) { iptables(p, "ip6tables", set, v6) },
	HostsDeny: func(p func(string, ...any), _ string, v4, v6 []exportEntry) {
		for _, e := range v4 {
			if e.p.IsSingleIP() {
				p("ALL: %s\n", e.p.Addr())
			} else {
				p("ALL: %s/%s\n", e.p.Addr(), mask4(e.p.Bits()))
			}
		}
		for _, e := range v6 {
			if e.p.IsSingleIP() {
				p("ALL: [%s]\n", e.p.Addr())
			} else {
				p("ALL: [%s]/%d\n", e.p.Addr(), e.p.Bits())
			}
		}
	},
	PF: func(p func(string, ...any), _ string, v4, v6 []exportEntry) {
		for _, e := range append(v4, v6...) {
			p("%s\n", e.p)
		}
	},
	NginxGeo: func(p func(string, ...any), _ string, v4, v6 []exportEntry) {
		for _, e := range append(v4, v6...) {
			p("%s 1;\n", e.p)
		}
	},
	NginxMap: func(p func(string, ...any), _ string, v4, v6 []exportEntry) {
		for _, e := range append(v4, v6...) {
			if e.p.IsSingleIP() {
				p("%q 1;\n", e.p.Addr().String())
			} else { // said, not dropped in silence
				p("# %s: a network, which a map cannot match: export nginx-geo to enforce it\n", e.p)
			}
		}
	},
}

// nftables writes the nft script of the entries: the table replaced
// whole, in the one transaction of nft -f ("table" makes it exist, so
// that "delete table" cannot fail on the first run).
func nftables(p func(string, ...any), set string, v4, v6 []exportEntry) {
	p("# sluice bans: nft -f this file. It replaces table inet %s: the sets of the\n", set)
	p("# banned networks and the chain that drops their sources on input.\n")
	p("table inet %[1]s\ndelete table inet %[1]s\ntable inet %[1]s {\n", set)
	for _, fam := range []struct {
		name, typ string
		es        []exportEntry
	}{{"banned4", "ipv4_addr", v4}, {"banned6", "ipv6_addr", v6}} {
		p("\tset %s {\n\t\ttype %s\n\t\tflags interval, timeout\n", fam.name, fam.typ)
		if rs := disjoint(fam.es); len(rs) > 0 {
			p("\t\telements = {\n")
			for i, r := range rs {
				sep := ","
				if i == len(rs)-1 {
					sep = ""
				}
				p("\t\t\t%s timeout %ds%s\n", r, r.timeout, sep)
			}
			p("\t\t}\n")
		}
		p("\t}\n")
	}
	p("\tchain input {\n\t\ttype filter hook input priority filter - 10; policy accept;\n")
	p("\t\tip saddr @banned4 drop\n\t\tip6 saddr @banned6 drop\n\t}\n}\n")
}

// iptables writes the input of tool-restore (iptables or ip6tables) of
// es to chain set, with the jump to add once in its header.
func iptables(p func(string, ...any), tool, set string, es []exportEntry) {
	p("# sluice bans: %s-restore --noflush < this file. It fills chain %s,\n", tool, set)
	p("# which drops the banned sources. Then jump to it from INPUT, once, with\n")
	p("#   %[1]s -C INPUT -j %[2]s || %[1]s -I INPUT -j %[2]s\n", tool, set)
	p("*filter\n:%s - [0:0]\n-F %s\n", set, set)
	for _, e := range es {
		p("-A %s -s %s -m comment --comment \"sluice ban, %ds left\" -j DROP\n", set, e.p, e.timeout)
	}
	p("COMMIT\n")
}

// An addrRange is the addresses from lo to hi, banned for timeout
// seconds.
type addrRange struct {
	lo, hi  netip.Addr
	timeout int64
}

// String writes r as nft reads it: a network when r is one, else lo-hi.
func (r addrRange) String() string {
	for bits := r.lo.BitLen(); bits >= 0; bits-- {
		p := netip.PrefixFrom(r.lo, bits)
		if p.Masked().Addr() != r.lo {
			break
		}
		if lastAddr(p) == r.hi {
			return p.String()
		}
	}
	return r.lo.String() + "-" + r.hi.String()
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// disjoint returns the addresses of es (in the order of exportEntries)
// as ranges that do not overlap, each banned for the longest timeout of
// the entries that hold it, neighbours of one timeout joined: what an
// nft interval set, which refuses overlapping elements, can hold, with
// each network dropped as long as its own ban lasts. Networks nest or
// are apart, so the entries open and close as a stack.
func disjoint(es []exportEntry) []addrRange {
	var out []addrRange
	emit := func(lo, hi netip.Addr, t int64) {
		if n := len(out); n > 0 && out[n-1].timeout == t && out[n-1].hi.Next() == lo {
			out[n-1].hi = hi
			return
		}
		out = append(out, addrRange{lo, hi, t})
	}
	type open struct {
		hi netip.Addr
		t  int64
	}
	var stack []open
	var cur netip.Addr // the first address not written yet; invalid past the last
	pop := func() {
		o := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if cur.IsValid() && !o.hi.Less(cur) {
			emit(cur, o.hi, o.t)
			cur = o.hi.Next()
		}
	}
	for _, e := range es {
		lo, hi := e.p.Masked().Addr(), lastAddr(e.p)
		for len(stack) > 0 && stack[len(stack)-1].hi.Less(lo) {
			pop()
		}
		t := e.timeout
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			if cur.Less(lo) {
				emit(cur, lo.Prev(), top.t)
			}
			t = max(t, top.t)
		}
		cur = lo
		stack = append(stack, open{hi, t})
	}
	for len(stack) > 0 {
		pop()
	}
	return out
}

// mask4 writes an IPv4 netmask of bits ones, as TCP wrappers read them.
func mask4(bits int) netip.Addr {
	m := ^uint32(0) << (32 - bits)
	if bits == 0 {
		m = 0
	}
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)})
}
