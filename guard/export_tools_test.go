package guard_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestExportLoads loads each firewall export into the real tool that
// reads it — nft, ipset, iptables-restore, ip6tables-restore, in a
// network namespace of their own (unshare -rn), so nothing touches the
// machine's firewall; nginx -t for the geo and map files — and checks
// that every banned address and network is there, and the username is
// not.
func TestExportLoads(t *testing.T) {
	now := time.Now()
	var bans []guard.Ban
	for _, k := range []string{"203.0.113.7", "198.51.100.0/24", "::ffff:192.0.2.9", "2001:db8::1", "2001:db8:bad::/48", "user:alice"} {
		bans = append(bans, guard.Ban{Jail: "j", Key: k, Since: now, Until: now.Add(time.Hour)})
	}
	v4 := []string{"203.0.113.7", "198.51.100.0/24", "192.0.2.9"}
	v6 := []string{"2001:db8::1", "2001:db8:bad::/48"}
	sbin := []string{"/usr/sbin", "/sbin"}
	for _, tt := range []struct {
		format guard.Format
		tool   string
		script string // FILE is the export; run in a network namespace unless nginx
		want   []string
	}{
		{guard.NFTables, "nft", "nft -f FILE && nft list table inet sluice", append(v4, v6...)},
		{guard.IPSet, "ipset", "ipset restore < FILE && ipset list", append(v4, v6...)},
		{guard.IPTables, "iptables-restore", "iptables-restore < FILE && iptables -S sluice", v4},
		{guard.IPTables6, "ip6tables-restore", "ip6tables-restore < FILE && ip6tables -S sluice", v6},
		{guard.NginxGeo, "nginx", "", append(v4, v6...)},
		{guard.NginxMap, "nginx", "", append(v4, v6...)}, // networks as comments that say so
	} {
		t.Run(string(tt.format), func(t *testing.T) {
			tool := testserver.Binary(t, tt.tool, sbin...)
			var b bytes.Buffer
			if err := guard.Export(&b, tt.format, bans, guard.ExportOptions{Set: "sluice"}); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "bans")
			if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			var out string
			if tt.tool == "nginx" {
				out = nginxCheck(t, tool, tt.format, file)
			} else {
				out = inNetns(t, filepath.Dir(tool), strings.ReplaceAll(tt.script, "FILE", file))
			}
			for _, w := range tt.want {
				if !strings.Contains(out, strings.TrimSuffix(w, "/32")) {
					t.Errorf("%s does not hold %s:\n%s", tt.tool, w, out)
				}
			}
			if strings.Contains(out, "alice") {
				t.Errorf("%s holds the username's ban:\n%s", tt.tool, out)
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
