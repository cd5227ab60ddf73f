package testserver

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartNginx runs nginx in the foreground with the configuration conf
// returns for its own prefix directory dir and a free loopback port,
// waits until it listens on 127.0.0.1:port and returns its base URL
// (http://127.0.0.1:port). conf must say "daemon off;", keep its pid,
// logs and temp paths under dir and listen on 127.0.0.1:port. nginx is
// stopped (fast shutdown) when the test ends.
func StartNginx(t testing.TB, conf func(dir string, port int) string) string {
	t.Helper()
	bin := Binary(t, "nginx", "/usr/sbin")
	return startListening(t, "nginx", func(dir string, port int) *exec.Cmd {
		confPath := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(confPath, []byte(conf(dir, port)), 0o600); err != nil {
			t.Fatal(err)
		}
		return exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	})
}

// NginxConf returns a configuration for StartNginx whose http block is
// http: nginx in the foreground with one worker, its pid, error log and
// temp paths under dir, and the client's address taken from the
// X-Forwarded-For a loopback peer sends (realip), as behind a trusted
// load balancer. http holds the access_log line and the server blocks.
func NginxConf(dir, http string) string {
	return "daemon off;\nworker_processes 1;\npid " + dir + "/nginx.pid;\nerror_log " + dir + "/error.log info;\n" +
		"events { worker_connections 256; }\nhttp {\n" +
		"  client_body_temp_path " + dir + "/body;\n  proxy_temp_path " + dir + "/proxy;\n" +
		"  fastcgi_temp_path " + dir + "/fastcgi;\n  uwsgi_temp_path " + dir + "/uwsgi;\n  scgi_temp_path " + dir + "/scgi;\n" +
		"  set_real_ip_from 127.0.0.0/8;\n  real_ip_header X-Forwarded-For;\n" + http + "}\n"
}

// NginxAuthLocations returns the two internal locations an nginx
// auth_request points at, for sluice serve at the base URL sluice:
// /_sluice asks its forward-auth for the request, /_sluice_login for the
// rule login, each denial a 403, with the original URI, method and
// client.
func NginxAuthLocations(sluice string) string {
	var b strings.Builder
	for _, l := range []struct{ name, query string }{{"/_sluice", ""}, {"/_sluice_login", "rule=login&"}} {
		b.WriteString("    location = " + l.name + " {\n      internal;\n" +
			"      proxy_pass " + sluice + "/v1/auth?" + l.query + "deny_status=403;\n" +
			"      proxy_pass_request_body off;\n      proxy_set_header Content-Length \"\";\n" +
			"      proxy_set_header X-Original-URI $request_uri;\n      proxy_set_header X-Original-Method $request_method;\n" +
			"      proxy_set_header X-Forwarded-For $remote_addr;\n    }\n")
	}
	return b.String()
}

// StartCaddy runs caddy with the Caddyfile conf returns for a free
// loopback port, with its data and configuration directories in a
// directory of its own, waits until it listens on 127.0.0.1:port and
// returns its base URL. conf should turn off the admin endpoint and
// automatic HTTPS and serve http://127.0.0.1:port. caddy is stopped when
// the test ends.
func StartCaddy(t testing.TB, conf func(port int) string) string {
	t.Helper()
	bin := Binary(t, "caddy", "/usr/bin")
	return startListening(t, "caddy", func(dir string, port int) *exec.Cmd {
		confPath := filepath.Join(dir, "Caddyfile")
		if err := os.WriteFile(confPath, []byte(conf(port)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--config", confPath, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
		return cmd
	})
}

// startListening starts the command start builds for a fresh directory
// and a free loopback port, and returns http://127.0.0.1:port once the
// process listens there, stopping it (SIGINT, then SIGKILL after 10 s)
// when the test ends. It makes three attempts, as the free port may be
// taken meanwhile; the output of a failed one, and the error.log it left
// in its directory, are logged.
func startListening(t testing.TB, what string, start func(dir string, port int) *exec.Cmd) string {
	t.Helper()
	for attempt := range 3 {
		dir := t.TempDir()
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cmd := start(dir, port)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() {
			exited <- cmd.Wait()
			close(exited) // so that a second receive, after waitListening's, does not block
		}()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if waitListening(addr, exited, 10*time.Second) {
			t.Cleanup(func() {
				_ = cmd.Process.Signal(os.Interrupt)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
			})
			return "http://" + addr
		}
		_ = cmd.Process.Kill()
		<-exited
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Logf("%s did not start (attempt %d): %s%s", what, attempt+1, out.String(), log)
	}
	t.Fatalf("%s did not start", what)
	return ""
}

// waitListening reports whether addr accepts connections before the
// process exits or the timeout passes.
func waitListening(addr string, exited <-chan error, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond) // polling a port, not timing logic
	}
	return false
}
