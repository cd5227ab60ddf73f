package guard_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// exportBans are the bans the firewall tests export: addresses, a
// network with an address within it banned longer, an IPv4-mapped
// address, IPv6 networks, and a username, which no firewall can hold.
func exportBans(now time.Time) []guard.Ban {
	var bans []guard.Ban
	for _, b := range []struct {
		key string
		d   time.Duration
	}{
		{"203.0.113.7", time.Hour}, {"198.51.100.0/24", time.Minute}, {"198.51.100.9", time.Hour},
		{"::ffff:192.0.2.9", time.Hour}, {"2001:db8::1", time.Hour}, {"2001:db8:bad::/48", time.Hour}, {"user:alice", time.Hour},
	} {
		bans = append(bans, guard.Ban{Jail: "j", Key: b.key, Since: now, Until: now.Add(b.d)})
	}
	return bans
}

// Sources of the firewall tests: each banned one is in a ban above, each
// free one in none (198.51.101.1 is beside the banned /24).
var (
	bannedSources = []string{"203.0.113.7", "198.51.100.20", "198.51.100.9", "192.0.2.9", "2001:db8::1", "2001:db8:bad:1::5"}
	freeSources   = []string{"203.0.113.8", "198.51.101.1", "2001:db8::2", "2001:db8:bad0::1"}
)

// firewalls are how a test applies an export: with tool, in the
// namespace, then the hook commands of its header where the format
// holds none of its own, then again, as a cron job would.
var firewalls = []struct {
	format guard.Format
	tool   string
	apply  string // FILE is the export
	show   string
}{
	{guard.NFTables, "nft", "nft -f FILE", "nft list table inet sluice"},
	{guard.IPSet, "ipset", "ipset restore < FILE", "ipset list"},
	{guard.IPTables, "iptables-restore", "iptables-restore --noflush < FILE", "iptables -S"},
	{guard.IPTables6, "ip6tables-restore", "ip6tables-restore --noflush < FILE", "ip6tables -S"},
}

// TestExportDrops applies each firewall export, twice, in a network namespace of its own (unshare -rn: nothing touches
// the machine's firewall) with the real tool, and checks from the
// namespace's own addresses that the kernel drops a connection from
// every banned source and lets one from every other through; for ipset
// and iptables, which need a rule outside their restore script, with
// the hook commands the export's header gives. A missing tool, or
// namespaces that cannot be made, fail the test under CI=true.
func TestExportDrops(t *testing.T) {
	testserver.SkipShort(t, "starts network namespaces")
	netns(t)
	sbin := []string{"/usr/sbin", "/sbin"}
	bans := exportBans(time.Now())
	for _, fw := range firewalls {
		t.Run(string(fw.format), func(t *testing.T) {
			tool := testserver.Binary(t, fw.tool, sbin...)
			file := writeExport(t, fw.format, bans)
			want4, want6 := fw.format != guard.IPTables6, fw.format != guard.IPTables
			var dropped, free []string
			for _, s := range bannedSources {
				if strings.Contains(s, ":") && want6 || !strings.Contains(s, ":") && want4 {
					dropped = append(dropped, s)
				}
			}
			for _, s := range freeSources {
				if strings.Contains(s, ":") && want6 || !strings.Contains(s, ":") && want4 {
					free = append(free, s)
				}
			}
			apply := strings.ReplaceAll(fw.apply, "FILE", file)
			script := strings.Join(slices.Concat([]string{apply}, hooks(t, file), []string{apply, fw.show + " >&2", probeCommand(dropped, free)}), " && ")
			out := inNetns(t, filepath.Dir(tool), script)
			if !strings.Contains(out, "probe: ok") {
				t.Errorf("%s:\n%s", fw.format, out)
			}
		})
	}
}

// TestExportEmpty: an export of no bans applies, and leaves the set
// empty: it lifts what an earlier export banned.
func TestExportEmpty(t *testing.T) {
	testserver.SkipShort(t, "starts network namespaces")
	netns(t)
	sbin := []string{"/usr/sbin", "/sbin"}
	for _, fw := range firewalls {
		t.Run(string(fw.format), func(t *testing.T) {
			tool := testserver.Binary(t, fw.tool, sbin...)
			full, empty := writeExport(t, fw.format, exportBans(time.Now())), writeExport(t, fw.format, nil)
			var free []string
			for _, s := range append(bannedSources, freeSources...) {
				if (fw.format != guard.IPTables6 || strings.Contains(s, ":")) && (fw.format != guard.IPTables || !strings.Contains(s, ":")) {
					free = append(free, s)
				}
			}
			script := strings.Join(slices.Concat([]string{strings.ReplaceAll(fw.apply, "FILE", full)}, hooks(t, full),
				[]string{strings.ReplaceAll(fw.apply, "FILE", empty), probeCommand(nil, free)}), " && ")
			if out := inNetns(t, filepath.Dir(tool), script); !strings.Contains(out, "probe: ok") {
				t.Errorf("%s of no bans after some:\n%s", fw.format, out)
			}
		})
	}
}

// writeExport writes the export of bans in f to a file, and returns its
// path.
func writeExport(t *testing.T, f guard.Format, bans []guard.Ban) string {
	t.Helper()
	var b bytes.Buffer
	if err := guard.Export(&b, f, bans, guard.ExportOptions{Set: "sluice"}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bans")
	if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// hooks returns the commands the header of the export in file says to
// run once: its comment lines indented under the first.
func hooks(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if cmd, ok := strings.CutPrefix(line, "#   "); ok {
			out = append(out, "{ "+strings.TrimSpace(cmd)+"; }")
		}
	}
	return out
}

// netns checks that network namespaces can be made: else it skips the
// test, or fails it under CI=true.
func netns(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("unshare", "-rn", "true").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("unshare -rn: %v %s: CI must be able to make network namespaces", err, out)
		}
		t.Skipf("unshare -rn: %v %s (CI=true would fail)", err, out)
	}
}

// probeServer is the address the probe connects to, on the namespace's
// loopback, as are the sources.
const (
	probeServer4 = "192.0.2.200"
	probeServer6 = "2001:db8:ffff::1"
)

// probeCommand returns the shell command that sets up the namespace's
// loopback with the sources and runs this test binary as the probe.
func probeCommand(dropped, free []string) string {
	var b strings.Builder
	b.WriteString("ip link set lo up")
	for _, a := range append(append([]string{probeServer4, probeServer6}, dropped...), free...) {
		fmt.Fprintf(&b, " && ip addr add %s dev lo", a)
		if strings.Contains(a, ":") {
			b.WriteString(" nodad")
		}
	}
	fmt.Fprintf(&b, " && SLUICE_PROBE_DROPPED=%s SLUICE_PROBE_FREE=%s %s -test.run='^$'",
		strings.Join(dropped, ","), strings.Join(free, ","), os.Args[0])
	return b.String()
}

// TestMain runs the tests, or, in the process TestExportDrops starts in
// a network namespace (SLUICE_PROBE_DROPPED or SLUICE_PROBE_FREE set),
// the firewall probe alone.
func TestMain(m *testing.M) {
	dropped, free := os.Getenv("SLUICE_PROBE_DROPPED"), os.Getenv("SLUICE_PROBE_FREE")
	if dropped == "" && free == "" {
		os.Exit(m.Run())
	}
	if err := firewallProbe(dropped, free); err != nil {
		fmt.Println("probe:", err)
		os.Exit(1)
	}
}

// firewallProbe connects from each source to a listener on the
// namespace's loopback. It prints "probe: ok" when every source of
// dropped is dropped (the connection times out) and every source of free
// connects.
func firewallProbe(dropped, free string) error {
	addrs := map[bool]string{}
	for _, server := range []string{probeServer4, probeServer6} {
		ln, err := net.Listen("tcp", net.JoinHostPort(server, "0"))
		if err != nil {
			return err
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		addrs[strings.Contains(server, ":")] = ln.Addr().String()
	}
	ok := true
	for _, list := range []struct {
		sources string
		passes  bool
	}{{dropped, false}, {free, true}} {
		for _, src := range strings.Split(list.sources, ",") {
			if src == "" {
				continue
			}
			// A drop shows as a timeout: short for the dropped sources,
			// long for the free ones, which a loaded machine may delay.
			timeout := 400 * time.Millisecond
			if list.passes {
				timeout = 5 * time.Second
			}
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: timeout}
			c, err := d.DialContext(context.Background(), "tcp", addrs[strings.Contains(src, ":")])
			if err == nil {
				c.Close()
			}
			if passed := err == nil; passed != list.passes {
				ok = false
				fmt.Printf("probe: from %s: connected %v, want %v (%v)\n", src, passed, list.passes, err)
			}
		}
	}
	if ok {
		fmt.Println("probe: ok")
	}
	return nil
}

// TestExportLoads loads the nginx exports into nginx -t, and checks that
// every banned address and network is there and the username is not.
func TestExportLoads(t *testing.T) {
	bans := exportBans(time.Now())
	want := []string{"203.0.113.7", "198.51.100.0/24", "192.0.2.9", "2001:db8::1", "2001:db8:bad::/48"}
	for _, f := range []guard.Format{guard.NginxGeo, guard.NginxMap} { // map: networks as comments that say so
		t.Run(string(f), func(t *testing.T) {
			nginx := testserver.Binary(t, "nginx", "/usr/sbin", "/sbin")
			for _, bs := range [][]guard.Ban{bans, nil} {
				out := nginxCheck(t, nginx, f, writeExport(t, f, bs))
				for _, w := range want {
					if bs != nil && !strings.Contains(out, strings.TrimSuffix(w, "/32")) {
						t.Errorf("%s does not hold %s:\n%s", f, w, out)
					}
				}
				if strings.Contains(out, "alice") {
					t.Errorf("%s holds the username's ban:\n%s", f, out)
				}
			}
		})
	}
}

// inNetns runs script with sh in new user and network namespaces, with
// dir on PATH, and returns its output.
func inNetns(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("unshare", "-rn", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unshare -rn sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

// nginxCheck has nginx -t read file as the body of a geo or map block,
// and returns file's content once nginx accepts it.
func nginxCheck(t *testing.T, nginx string, f guard.Format, file string) string {
	t.Helper()
	dir := t.TempDir()
	block := fmt.Sprintf("geo $banned { default 0; include %s; }", file)
	if f == guard.NginxMap {
		block = fmt.Sprintf("map $remote_addr $banned { default 0; include %s; }", file)
	}
	conf := filepath.Join(dir, "nginx.conf")
	text := fmt.Sprintf("pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp { %s }\n", dir, dir, block)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-q", "-c", conf, "-p", dir).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
