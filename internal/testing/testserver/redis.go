package testserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startTimeout bounds how long a Redis server may take to answer PING.
const startTimeout = 10 * time.Second

// A Redis is a redis-server process owned by a test. It is not safe for
// concurrent use.
type Redis struct {
	Addr string   // host:port
	Port int      // port
	Dir  string   // its working directory
	args []string // extra arguments
	bin  string
	// conf, when set, makes the server a Sentinel: the configuration it
	// returns for the server's port is written to sentinel.conf in Dir
	// at every start, and the server runs with --sentinel.
	conf func(port int) string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// StartRedis starts a redis-server on a free loopback port with persistence
// off and extra args appended ("--maxmemory", "1mb", ...). It is stopped
// when the test ends.
func StartRedis(t testing.TB, args ...string) *Redis {
	t.Helper()
	s, err := LaunchRedis(Binary(t, "redis-server"), t.TempDir(), args...)
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// LaunchRedis starts redis-server bin in dir on a free loopback port, for
// servers that outlive one test (started in TestMain); the caller stops
// it.
func LaunchRedis(bin, dir string, args ...string) (*Redis, error) {
	s := &Redis{bin: bin, Dir: dir, args: args}
	var err error
	for range 5 { // another process may take the port between pick and bind
		if s.Port, err = FreePort(); err != nil {
			return nil, err
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func (s *Redis) start() error {
	args := append([]string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.Dir,
		"--logfile", filepath.Join(s.Dir, "redis.log"),
		"--protected-mode", "no",
	}, s.args...)
	if s.conf != nil {
		conf := filepath.Join(s.Dir, "sentinel.conf")
		if err := os.WriteFile(conf, []byte(s.conf(s.Port)), 0o600); err != nil {
			return err
		}
		args = append([]string{conf, "--sentinel"}, s.args...)
	}
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if _, err := s.Do("PING"); err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redis-server exited: %s", lastLines(string(log), 5))
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.Stop()
	return fmt.Errorf("redis-server on %s did not answer PING within %v", s.Addr, startTimeout)
}

// Stop kills the server, if it runs, and waits for it to exit.
func (s *Redis) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port, with an empty data
// set: a crashed and restarted Redis.
func (s *Redis) Restart() error { return restart("redis-server", s.Addr, s.Stop, s.start) }

// Do sends one command over a fresh connection and returns the reply in
// RESP form, parsed loosely: a status, error, integer or bulk string as
// text; an array as its elements joined by newlines. It is for test
// setup and inspection (INFO, CONFIG SET, SCRIPT FLUSH), not for load.
func (s *Redis) Do(args ...string) (string, error) {
	return RedisDo(s.Addr, args...)
}

// RedisDo is Redis.Do on any address.
func RedisDo(addr string, args ...string) (string, error) {
	replies, err := RedisDoAll(addr, args)
	if err != nil {
		return "", err
	}
	return replies[0], nil
}

// RedisDoAll sends cmds, in order, over one fresh connection to addr and
// returns their replies as RedisDo does, stopping at the first error. One
// connection matters to WAIT, which waits for the replication of the
// writes of its own connection.
func RedisDoAll(addr string, cmds ...[]string) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	for _, args := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	replies := make([]string, len(cmds))
	for i := range cmds {
		if replies[i], err = readReply(r); err != nil {
			return nil, err
		}
	}
	return replies, nil
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unknown reply %q", line)
}

// Info returns the fields of INFO section as a map.
func (s *Redis) Info(section string) (map[string]string, error) {
	out, err := s.Do("INFO", section)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(out, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// clusterTimeout bounds how long a new cluster may take to agree.
const clusterTimeout = 20 * time.Second

// StartRedisCluster starts a Redis Cluster of n masters (n ≥ 3) on loopback,
// each in its own directory, joins them with redis-cli --cluster create,
// and waits until every node reports cluster_state:ok. The nodes are
// stopped when the test ends.
func StartRedisCluster(t testing.TB, n int) []*Redis {
	t.Helper()
	bin, cli := Binary(t, "redis-server"), Binary(t, "redis-cli")
	nodes := make([]*Redis, n)
	addrs := make([]string, n)
	for i := range nodes {
		var err error
		for range 20 { // the cluster bus listens on port+10000: both must be free
			var s *Redis
			dir := t.TempDir()
			s, err = launchCluster(bin, dir)
			if err == nil {
				nodes[i] = s
				break
			}
		}
		if err != nil {
			t.Fatalf("start cluster node: %v", err)
		}
		t.Cleanup(nodes[i].Stop)
		addrs[i] = nodes[i].Addr
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(clusterTimeout)
	for _, s := range nodes {
		for {
			info, err := s.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ok after %v: %q %v", s.Addr, clusterTimeout, info, err)
			}
			time.Sleep(50 * time.Millisecond) // polling the cluster state, bounded by deadline
		}
	}
	return nodes
}

func launchCluster(bin, dir string) (*Redis, error) {
	var port int
	for {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		if err != nil {
			continue
		}
		l.Close()
		port = p
		break
	}
	s := &Redis{bin: bin, Dir: dir, Port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		args: []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000"}}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// RedisCPU returns the CPU time the Redis at addr has used since it
// started (used_cpu_sys plus used_cpu_user of INFO cpu), or -1 if it did
// not answer.
func RedisCPU(addr string) time.Duration {
	info, err := RedisDo(addr, "INFO", "cpu")
	if err != nil {
		return -1
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// RedisCalls returns the calls of command cmd (lower case) on the Redis at
// addr since it started, from INFO commandstats: 0 if it was never
// called, -1 if the server did not answer.
func RedisCalls(addr, cmd string) int64 {
	info, err := RedisDo(addr, "INFO", "commandstats")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _, _ := strings.Cut(v, ",")
			c, _ := strconv.ParseInt(n, 10, 64)
			return c
		}
	}
	return 0
}

// A RedisTLS is a redis-server that serves TLS on TLSAddr, beside plain
// text on Addr (for the test's own setup and inspection with Do).
type RedisTLS struct {
	*Redis
	TLSAddr string // host:port of the TLS listener
}

// StartRedisTLS starts a redis-server as StartRedis does, serving TLS
// too on another free loopback port, with the PEM files certFile and
// keyFile, and trusting caFile for client certificates, which clients
// must present when authClients is "yes" ("no" and "optional" are
// Redis's other choices). It is stopped when the test ends.
func StartRedisTLS(t testing.TB, certFile, keyFile, caFile, authClients string, args ...string) *RedisTLS {
	t.Helper()
	bin := Binary(t, "redis-server")
	var err error
	for range 5 { // another process may take the TLS port between pick and bind
		var port int
		if port, err = FreePort(); err != nil {
			break
		}
		var s *Redis
		s, err = LaunchRedis(bin, t.TempDir(), append([]string{"--tls-port", strconv.Itoa(port),
			"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile,
			"--tls-auth-clients", authClients}, args...)...)
		if err == nil {
			t.Cleanup(s.Stop)
			return &RedisTLS{Redis: s, TLSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		}
	}
	t.Fatalf("start redis-server with TLS: %v", err)
	return nil
}
