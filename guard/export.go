package guard

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Format names a firewall or edge format that Export writes.
type Format string

// The formats Export writes. Each output replaces the whole set it
// manages, so a cron job can apply it again and again.
const (
	// NFTables is an `nft -f` script filling the sets banned4 and banned6
	// of table inet <Set>, with timeouts. Drop from them with a rule of
	// your own: `ip saddr @banned4 drop`.
	NFTables Format = "nftables"
	// IPSet is an `ipset restore` script filling <Set>4 and <Set>6
	// (hash:net), with timeouts.
	IPSet Format = "ipset"
	// IPTables is an `iptables-restore --noflush` script filling the chain
	// <Set> of the filter table (IPv4; ip6tables gets IPTables6). Jump to
	// it from INPUT yourself.
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
// seconds. Errors wrap sluice.ErrInvalidRequest for a bad format or set
// name, or are w's.
func Export(w io.Writer, f Format, bans []Ban, o ExportOptions) error {
	if o.Set == "" {
		o.Set = "sluice"
	}
	for _, c := range o.Set {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') || len(o.Set) > 28 {
			return fmt.Errorf("%w: guard: export set name %q", sluice.ErrInvalidRequest, o.Set)
		}
	}
	write, ok := exporters[f]
	if !ok {
		return fmt.Errorf("%w: guard: unknown export format %q (want %s)", sluice.ErrInvalidRequest, f, formatNames())
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	v4, v6 := exportEntries(bans, o.Now)
	bw := bufio.NewWriter(w)
	write(func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }, o.Set, v4, v6)
	return bw.Flush()
}

// An exportEntry is a banned address or network, and the whole seconds
// its ban has left.
type exportEntry struct {
	p       netip.Prefix
	timeout int64
}

// exportEntries returns the bans in force at now whose keys are
// addresses or networks, IPv4 and IPv6 apart.
func exportEntries(bans []Ban, now time.Time) (v4, v6 []exportEntry) {
	for _, b := range bans {
		p, err := ParsePrefix(b.Key)
		left := b.Until.Sub(now)
		if err != nil || left <= 0 {
			continue
		}
		e := exportEntry{p, int64((left + time.Second - 1) / time.Second)}
		if p.Addr().Is4() {
			v4 = append(v4, e)
		} else {
			v6 = append(v6, e)
		}
	}
	return v4, v6
}

// exporters write the entries of each format, with p, for the set.
var exporters = map[Format]func(p func(string, ...any), set string, v4, v6 []exportEntry){
	NFTables: func(p func(string, ...any), set string, v4, v6 []exportEntry) {
		p("# sluice bans: nft -f this file\n")
		p("add table inet %s\n", set)
		for _, fam := range []struct {
			name, typ string
			es        []exportEntry
		}{{"banned4", "ipv4_addr", v4}, {"banned6", "ipv6_addr", v6}} {
			p("add set inet %s %s { type %s; flags interval, timeout; }\n", set, fam.name, fam.typ)
			p("flush set inet %s %s\n", set, fam.name)
			for _, e := range fam.es {
				p("add element inet %s %s { %s timeout %ds }\n", set, fam.name, e.p, e.timeout)
			}
		}
	},
	IPSet: func(p func(string, ...any), set string, v4, v6 []exportEntry) {
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
	IPTables:  func(p func(string, ...any), set string, v4, _ []exportEntry) { iptables(p, set, v4) },
	IPTables6: func(p func(string, ...any), set string, _, v6 []exportEntry) { iptables(p, set, v6) },
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

// iptables writes the iptables-restore input of es to chain set.
func iptables(p func(string, ...any), set string, es []exportEntry) {
	p("*filter\n:%s - [0:0]\n-F %s\n", set, set)
	for _, e := range es {
		p("-A %s -s %s -m comment --comment \"sluice ban, %ds left\" -j DROP\n", set, e.p, e.timeout)
	}
	p("COMMIT\n")
}

func formatNames() string {
	s := make([]string, len(Formats))
	for i, f := range Formats {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// mask4 writes an IPv4 netmask of bits ones, as TCP wrappers read them.
func mask4(bits int) netip.Addr {
	m := ^uint32(0) << (32 - bits)
	if bits == 0 {
		m = 0
	}
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)})
}
