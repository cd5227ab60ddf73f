package config

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

const twoRules = `rules:
  - name: login
    limits: ["5/min"]
  - name: api
    limits: ["100/s"]
`

func TestParseService(t *testing.T) {
	t.Setenv("SLUICE_TEST_REDIS_PASSWORD", "s3cret")
	t.Setenv("SLUICE_TEST_TOKEN", "0123456789abcdef-token")
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name, in string
		want     Config // Listen and Rules are not compared
	}{
		{
			name: "defaults",
			in:   twoRules,
			want: Config{
				Store:       Store{Type: StoreMemory},
				Failure:     Failure{Policy: sluice.FailLocal, Timeout: DefaultFailureTimeout, Instances: 1},
				ForwardAuth: ForwardAuth{Key: []string{"ip"}, TrustedProxies: loopback, DenyStatus: 429, IPv6Prefix: 64}, // two rules: none by default
			},
		},
		{
			name: "redis with everything",
			in: twoRules + `  - domain: edge
    descriptors: [{key: remote_address, limits: ["10/s"]}]
store:
  type: redis
  redis: {addrs: ["10.0.0.1:6379", "10.0.0.2:6379"], username: app, password_env: SLUICE_TEST_REDIS_PASSWORD, db: 2, in_flight: 2}
failure:
  policy: open
  timeout: 50ms
  instances: 4
  rules: {login: closed, edge: local}
admin: {token_env: SLUICE_TEST_TOKEN}
guard:
  allow: [10.0.0.0/8, "key:ops"]
  deny: [192.0.2.7]
  max_bans: 1000
  max_key_bans: 100
  coarsen_ipv4: 20
  coarsen_ipv6: 56
  jails:
    - {name: abuse, rules: [api, login], max_failures: 20, find_time: 1m, ban_time: 10m, max_ban_time: 24h, growth: 3, jitter: 0.25}
forward_auth:
  rule: api
  key: [ip, method, path, "header:X-Api-Key"]
  trusted_proxies: [10.1.0.0/16]
  deny_status: 403
  ipv6_prefix: 56
`,
			want: Config{
				Store: Store{Type: StoreRedis, Redis: RedisStore{
					Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}, Username: "app", Password: "s3cret", DB: 2, InFlight: 2,
				}},
				Failure: Failure{Policy: sluice.FailOpen, Timeout: 50 * time.Millisecond, Instances: 4, Rules: map[string]sluice.FailurePolicy{"login": sluice.FailClosed, "edge": sluice.FailLocal}},
				Admin:   Admin{Listen: DefaultAdminListen, Token: "0123456789abcdef-token"},
				Guard: Guard{Allow: []guard.Entry{guard.NetEntry(netip.MustParsePrefix("10.0.0.0/8")), guard.KeyEntry("ops")}, Deny: []guard.Entry{guard.NetEntry(netip.MustParsePrefix("192.0.2.7/32"))}, MaxBans: 1000, MaxKeyBans: 100, CoarsenIPv4: 20, CoarsenIPv6: 56, Jails: []Jail{{
					Name: "abuse", Rules: []string{"api", "login"}, MaxFailures: 20, FindTime: time.Minute,
					BanTime: 10 * time.Minute, MaxBanTime: 24 * time.Hour, Growth: 3, Jitter: 0.25,
				}}},
				ForwardAuth: ForwardAuth{Rule: "api", Key: []string{"ip", "method", "path", "header:X-Api-Key"},
					TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, DenyStatus: 403, IPv6Prefix: 56},
			},
		},
		{
			name: "sentinel",
			in: twoRules + `store:
  type: redis
  redis:
    sentinel: {master: mymaster, addrs: ["10.0.0.1:26379", "10.0.0.2:26379"], password: x}
admin: {listen: "[::1]:9091", token: "a-token-of-sixteen+"}
`,
			want: Config{
				Store: Store{Type: StoreRedis, Redis: RedisStore{Sentinel: Sentinel{
					Master: "mymaster", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, Password: "x",
				}}},
				Failure:     Failure{Policy: sluice.FailLocal, Timeout: DefaultFailureTimeout, Instances: 1},
				Admin:       Admin{Listen: "[::1]:9091", Token: "a-token-of-sixteen+"},
				ForwardAuth: ForwardAuth{Key: []string{"ip"}, TrustedProxies: loopback, DenyStatus: 429, IPv6Prefix: 64}, // two rules: none by default
			},
		},
		{
			name: "memcached",
			in:   twoRules + "store: {type: memcached, memcached: {addrs: [\"m1:11211\", \"m2:11211\"], weights: [1, 2]}}\n",
			want: Config{
				Store:       Store{Type: StoreMemcached, Memcached: MemcachedStore{Addrs: []string{"m1:11211", "m2:11211"}, Weights: []int{1, 2}}},
				Failure:     Failure{Policy: sluice.FailLocal, Timeout: DefaultFailureTimeout, Instances: 1},
				ForwardAuth: ForwardAuth{Key: []string{"ip"}, TrustedProxies: loopback, DenyStatus: 429, IPv6Prefix: 64}, // two rules: none by default
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("t.yaml", []byte(tt.in))
			if err != nil {
				t.Fatalf("Parse(%q) error = %v, want nil", tt.in, err)
			}
			got := *c
			got.Listen, got.Rules, got.Domains = "", nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q) =\n%+v, want\n%+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseServiceErrors(t *testing.T) {
	t.Setenv("SLUICE_TEST_EMPTY", "")
	tests := []parseError{
		{"redis without addrs", "store: {type: redis}\n", []string{"t.yaml:6:8: store.redis.addrs:", "at least one address"}},
		{"redis bad addr", "store: {type: redis, redis: {addrs: [x]}}\n", []string{"t.yaml:6:38: store.redis.addrs[0]:", `"x" is not host:port`}},
		{"redis bad port", "store:\n  type: redis\n  redis:\n    addrs: [\"h:1\", \"h:99999\"]\n", []string{"t.yaml:9:20: store.redis.addrs[1]:"}},
		{"redis both", "store: {type: redis, redis: {addrs: [\"h:1\"], sentinel: {master: m, addrs: [\"s:1\"]}}}\n", []string{"store.redis.addrs: set addrs or sentinel, not both"}},
		{"sentinel without master", "store: {type: redis, redis: {sentinel: {addrs: [\"s:1\"]}}}\n", []string{"store.redis.sentinel: sentinel addrs without a master"}},
		{"sentinel without addrs", "store: {type: redis, redis: {sentinel: {master: m}}}\n", []string{"store.redis.sentinel.addrs: at least one"}},
		{"password both", "store: {type: redis, redis: {addrs: [\"h:1\"], password: a, password_env: B}}\n", []string{"store.redis: set one of password, password_env and password_file"}},
		{"password env unset", "store: {type: redis, redis: {addrs: [\"h:1\"], password_env: SLUICE_TEST_UNSET_VAR}}\n", []string{"store.redis.password_env: environment variable SLUICE_TEST_UNSET_VAR is not set"}},
		{"negative db", "store: {type: redis, redis: {addrs: [\"h:1\"], db: -1}}\n", []string{"store.redis.db:"}},
		{"in_flight", "store: {type: redis, redis: {addrs: [\"h:1\"], in_flight: -2}}\n", []string{"t.yaml:6:57: store.redis.in_flight:", "in_flight -2"}},
		{"unknown redis field", "store: {type: redis, redis: {adrs: [\"h:1\"]}}\n", []string{`t.yaml:6:30: store.redis: unknown field "adrs"; did you mean "addrs"?`}},
		{"memcached without addrs", "store: {type: memcached}\n", []string{"store.memcached.addrs: at least one"}},
		{"memcached weights", "store: {type: memcached, memcached: {addrs: [\"a:1\", \"b:1\"], weights: [1]}}\n", []string{"store.memcached.weights: 1 weights for 2 servers"}},
		{"memcached zero weight", "store: {type: memcached, memcached: {addrs: [\"a:1\"], weights: [0]}}\n", []string{"store.memcached.weights[0]: weight 0"}},
		{"failure policy", "failure: {policy: maybe}\n", []string{"t.yaml:6:19: failure.policy:", `unknown policy "maybe"`}},
		{"failure timeout", "failure: {timeout: -1s}\n", []string{"failure.timeout:"}},
		{"failure timeout unit", "failure: {timeout: 10}\n", []string{`t.yaml:6:20: failure.timeout: "10" is not a duration: write a number and a unit`}},
		{"failure instances", "failure: {instances: -2}\n", []string{"failure.instances:"}},
		{"failure unknown rule", "failure:\n  rules: {signup: open}\n", []string{"t.yaml:7:19: failure.rules.signup:", `no rule or domain named "signup"`}},
		{"failure rule policy", "failure:\n  rules: {login: sometimes}\n", []string{"failure.rules.login:", `unknown policy "sometimes"`}},
		{"admin short token", "admin: {token: short}\n", []string{"t.yaml:6:8: admin:", "at least 16"}},
		{"admin token space", "admin: {token: \"0123456789 abcdef\"}\n", []string{"admin: the token must not contain white space"}},
		{"admin empty env", "admin: {token_env: SLUICE_TEST_EMPTY}\n", []string{"admin.token_env: environment variable SLUICE_TEST_EMPTY is not set"}},
		{"admin listen without token", "admin: {listen: \"127.0.0.1:1\"}\n", []string{"admin.listen: an admin listener needs a token"}},
		{"admin read-only token short", "admin: {token: 0123456789abcdefgh, read_only_token: short}\n", []string{"admin: the read-only token is 5 bytes"}},
		{"admin read-only token is the token", "admin: {token: 0123456789abcdefgh, read_only_token: 0123456789abcdefgh}\n", []string{"the read-only token must differ from the token"}},
		{"admin bad listen", "admin: {token: 0123456789abcdefgh, listen: nope}\n", []string{"admin.listen:", "not host:port"}},
		{"guard bad allow", "guard:\n  allow: [10.0.0.0/8, 10.0.0.300]\n", []string{"t.yaml:7:23: guard.allow[1]:", "is not an address (203.0.113.7), a network (198.51.100.0/24) or key:NAME"}},
		{"guard bad deny", "guard: {deny: [\"::1/200\"]}\n", []string{"guard.deny[0]:"}},
		{"guard empty key", "guard: {deny: [\"key:\"]}\n", []string{"guard.deny[0]:", `"key:" is not an address`}},
		{"guard state file with redis", "store: {type: redis, redis: {addrs: [\"127.0.0.1:6379\"]}}\nguard: {state_file: /var/lib/sluice/state.json}\n",
			[]string{"guard.state_file:", "the redis store keeps the bans itself"}},
		{"guard max_bans", "guard: {max_bans: -1}\n", []string{"t.yaml:6:19: guard.max_bans:", "must not be negative"}},
		{"guard max_key_bans", "guard: {max_bans: 10, max_key_bans: 10}\n", []string{"guard.max_key_bans:", "0 (half of max_bans) to 9"}},
		{"guard max_key_bans default", "guard: {max_key_bans: 100000}\n", []string{"guard.max_key_bans:", "to 99999"}},
		{"guard max_key_bans negative", "guard: {max_key_bans: -1}\n", []string{"guard.max_key_bans:"}},
		{"guard coarsen_ipv4", "guard: {coarsen_ipv4: 4}\n", []string{"guard.coarsen_ipv4:", "8 to 32"}},
		{"guard coarsen_ipv4 long", "guard: {coarsen_ipv4: 33}\n", []string{"guard.coarsen_ipv4:"}},
		{"guard coarsen_ipv6", "guard: {coarsen_ipv6: 8}\n", []string{"guard.coarsen_ipv6:", "16 to 128"}},
		{"jail no name", "guard: {jails: [{rules: [api]}]}\n", []string{"guard.jails[0].name:", "jail name"}},
		{"jail dup", "guard:\n  jails:\n    - {name: j, rules: [api]}\n    - {name: j, rules: [api]}\n", []string{"t.yaml:9:14: guard.jails[1].name:", "already defined at line 8"}},
		{"jail no rules", "guard: {jails: [{name: j}]}\n", []string{"guard.jails[0].rules:", "names no rules"}},
		{"jail unknown rule", "guard: {jails: [{name: j, rules: [api, nope]}]}\n", []string{"guard.jails[0].rules[1]:", `no rule named "nope"`}},
		{"jail negative", "guard: {jails: [{name: j, rules: [api], max_failures: -1}]}\n", []string{"t.yaml:6:55: guard.jails[0].max_failures:", "must not be negative"}},
		{"jail growth", "guard: {jails: [{name: j, rules: [api], growth: 0.5}]}\n", []string{"guard.jails[0].growth:"}},
		{"jail jitter", "guard: {jails: [{name: j, rules: [api], jitter: 1.5}]}\n", []string{"guard.jails[0].jitter:", "0 (none) to 1"}},
		{"jail negative jitter", "guard: {jails: [{name: j, rules: [api], jitter: -0.1}]}\n", []string{"guard.jails[0].jitter:"}},
		{"jail max ban", "guard: {jails: [{name: j, rules: [api], ban_time: 1h, max_ban_time: 30m}]}\n", []string{"guard.jails[0].max_ban_time:"}},
		{"jail huge", "guard: {jails: [{name: j, rules: [api], ban_time: 100000h}]}\n", []string{"t.yaml:6:51: guard.jails[0].ban_time:", "is more than 43920h"}},
		{"unknown jail field", "guard: {jails: [{name: j, rules: [api], bantime: 1h}]}\n", []string{`guard.jails[0]: unknown field "bantime"; did you mean "ban_time"?`}},
		{"fa rule", "forward_auth: {rule: nope}\n", []string{"forward_auth.rule:", `no rule named "nope"`}},
		{"fa key", "forward_auth: {key: [ip, cookie]}\n", []string{"forward_auth.key[1]:", `unknown key part "cookie"`}},
		{"fa header", "forward_auth: {key: [\"header:\"]}\n", []string{"forward_auth.key[0]:"}},
		{"fa proxies", "forward_auth: {trusted_proxies: [everyone]}\n", []string{"forward_auth.trusted_proxies[0]:"}},
		{"fa ipv6 prefix", "forward_auth: {ipv6_prefix: 129}\n", []string{"forward_auth.ipv6_prefix:", "1 to 128"}},
		{"fa status", "forward_auth: {deny_status: 500}\n", []string{"forward_auth.deny_status:", "429 or 403"}},
		{"login name", "logins: [{name: \"a b\"}]\n", []string{"logins[0].name:", "login name"}},
		{"login dup", "logins:\n  - {name: web}\n  - {name: web}\n", []string{"t.yaml:8:12: logins[1].name:", "already defined at line 7"}},
		{"login limit", "logins: [{name: web, per_user: \"lots\"}]\n", []string{"logins[0].per_user:"}},
		{"login jail", "logins: [{name: web, jail: nope}]\n", []string{"logins[0].jail:", `no jail named "nope"`}},
		{"login negative", "logins: [{name: web, captcha_after: -1}]\n", []string{"t.yaml:6:37: logins[0].captcha_after:", "must not be negative"}},
		{"login ipv6", "logins: [{name: web, ipv6_prefix: 200}]\n", []string{"logins[0].ipv6_prefix:"}},
		{"login secret both", "logins: [{name: web, secret: a, secret_env: B}]\n", []string{"logins[0]: set one of secret"}},
		{"login unknown field", "logins: [{name: web, per_ip_usr: 5/min}]\n", []string{`logins[0]: unknown field "per_ip_usr"; did you mean "per_ip_user"?`}},
	}
	checkParseErrors(t, "t.yaml", twoRules, tests)
}

func TestFailurePolicyOf(t *testing.T) {
	f := Failure{Policy: sluice.FailLocal, Rules: map[string]sluice.FailurePolicy{"login": sluice.FailClosed}}
	for rule, want := range map[string]sluice.FailurePolicy{"login": sluice.FailClosed, "api": sluice.FailLocal} {
		if got := f.PolicyOf(rule); got != want {
			t.Errorf("PolicyOf(%q) = %v, want %v", rule, got, want)
		}
	}
}
