package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/suggest"
)

// Store types.
const (
	// StoreMemory keeps state in the process: fast, not shared. The
	// default.
	StoreMemory = "memory"
	// StoreRedis keeps state in Redis (one server, a Cluster or a
	// Sentinel-managed primary), shared by every process that uses it.
	StoreRedis = "redis"
	// StoreMemcached keeps state in a fleet of memcached servers.
	StoreMemcached = "memcached"
)

// Defaults of the service sections.
const (
	// DefaultAdminListen is where the admin API listens when it is on
	// and admin.listen is not set: loopback only.
	DefaultAdminListen = "127.0.0.1:8081"
	// DefaultFailureTimeout bounds each call of a shared store.
	DefaultFailureTimeout = 100 * time.Millisecond
	// MinTokenLen is the shortest admin token accepted: 16 bytes is too
	// long to guess at any rate a network allows.
	MinTokenLen = 16
)

// Store chooses and configures the store that keeps limiter state.
type Store struct {
	// Type names the store: StoreMemory (the default), StoreRedis or
	// StoreMemcached.
	Type string
	// Memory configures the memory store.
	Memory MemoryStore
	// Redis configures the Redis store; Addrs is required when Type is
	// StoreRedis.
	Redis RedisStore
	// Memcached configures the memcached store; Addrs is required when
	// Type is StoreMemcached.
	Memcached MemcachedStore
}

// Shared reports whether the store lives outside the process, where it
// can fail and a failure policy applies.
func (s Store) Shared() bool { return s.Type != StoreMemory }

// MemoryStore configures a store/memory Store.
type MemoryStore struct {
	// MaxBytes caps the memory the store holds: its states, and an
	// eighth for the summaries of the states it evicts (see package
	// store/memory). Default 0: the store's default (256 MiB); negative
	// means no cap.
	MaxBytes int64
}

// RedisStore configures a store/redis Store.
type RedisStore struct {
	// Addrs are one Redis server, or seed nodes of a Redis Cluster (the
	// client detects a cluster), host:port each. Without Sentinel,
	// required.
	Addrs []string
	// Username and Password authenticate to Redis: an ACL user, or
	// Password alone for requirepass (the user "default"). Default none.
	// The file may name an environment variable (password_env) or a file
	// (password_file) holding the password instead of the password
	// itself.
	Username, Password string
	// TLS, when set, connects to Redis over TLS: to the servers and to
	// the sentinels. Default nil: plain text.
	TLS *RedisTLS
	// DB selects a database of a single server. Default 0.
	DB int
	// Sentinel, when its Master is set, finds the primary through Redis
	// Sentinel: its Addrs are the sentinels, and RedisStore.Addrs must be
	// empty.
	Sentinel Sentinel
	// InFlight is how many script calls may be on their way to Redis at
	// once before further decisions queue for the next batch (see
	// redis.Config.InFlight). Default 0: the store's default (2); -1: no
	// queue.
	InFlight int
}

// Sentinel configures Redis Sentinel discovery.
type Sentinel struct {
	// Master is the name of the monitored primary (the master set).
	Master string
	// Addrs are the sentinels, host:port each.
	Addrs []string
	// Username and Password authenticate to the sentinels. Default none;
	// password_env names an environment variable instead, password_file
	// a file.
	Username, Password string
}

// MemcachedStore configures a store/memcached Store.
type MemcachedStore struct {
	// Addrs are the memcached servers, host:port each, listed the same
	// way in every process. At least one.
	Addrs []string
	// Weights, when set, gives the weight of each server of Addrs.
	// Default all equal.
	Weights []int
}

// Failure is what rules answer while a shared store fails (an error, or
// no answer within Timeout). It does not apply to the memory store, which
// cannot fail.
type Failure struct {
	// Policy is the default policy: sluice.FailLocal (the default:
	// decide on a store in the process, each limit divided among
	// Instances, and replay the local takes into the shared store when it
	// answers again), FailOpen (allow every request) or FailClosed (refuse
	// to decide: the service answers 503).
	Policy sluice.FailurePolicy
	// Timeout bounds each call of the store. Default
	// DefaultFailureTimeout.
	Timeout time.Duration
	// Instances is how many sluice processes share the store: under
	// FailLocal each limit is divided among them. Default 1.
	Instances int
	// Rules sets the policy of single named rules and domains, by name,
	// overriding Policy. Default none.
	Rules map[string]sluice.FailurePolicy
}

// PolicyOf returns the failure policy of the named rule.
func (f Failure) PolicyOf(rule string) sluice.FailurePolicy {
	if p, ok := f.Rules[rule]; ok {
		return p
	}
	return f.Policy
}

// Admin configures the admin API: bans, allow and deny lists, rules, peek
// and the dashboard.
type Admin struct {
	// Listen is the address of the admin listener. Default
	// DefaultAdminListen when Token is set.
	Listen string
	// Token is the bearer token every admin request must carry: at least
	// MinTokenLen bytes. Default empty: the admin API is off. The file
	// may name an environment variable (token_env) or a file
	// (token_file) holding it rather than hold it.
	Token string
	// ReadOnlyToken, when set, is a second token that views the admin
	// API and the dashboard and changes nothing (for a wallboard or a
	// script that reads): at least MinTokenLen bytes, not Token. It may
	// come from read_only_token_env or read_only_token_file too. Default
	// empty: none.
	ReadOnlyToken string
	// TLS, when set, serves the admin listener over TLS (with
	// ClientCAFile: only to clients with a certificate). Default nil:
	// plain text, which the loopback default suits.
	TLS *ServerTLS
}

// GRPC configures the listener of Envoy's rate limit gRPC API.
type GRPC struct {
	// Listen is its address, host:port. Default empty: no gRPC listener
	// (sluice serve -grpc-listen sets one).
	Listen string
	// TLS, when set, serves gRPC over TLS. Default nil: plain text.
	TLS *ServerTLS
}

// Enabled reports whether the admin API is on.
func (a Admin) Enabled() bool { return a.Token != "" }

// Guard configures the abuse policy above the rules: allow and deny lists
// and jails, applied by forward-auth to the client's address and by the
// HTTP and gRPC APIs to the key of a named rule (bans only for the rules
// a jail counts, on those APIs).
type Guard struct {
	// Allow lists addresses, networks and "key:" entries that skip every
	// limit, as guard.ParseEntry reads them. Default none.
	Allow []guard.Entry
	// Deny lists addresses, networks and "key:" entries refused with 403,
	// as guard.ParseEntry reads them. Default none.
	Deny []guard.Entry
	// Jails ban actors whose requests are denied too often. Default none.
	Jails []Jail
	// MaxBans bounds the bans the ban registry holds (see guard.BanSet:
	// at capacity, address bans merge into network bans). Default 0:
	// guard.DefaultMaxBans (100,000).
	MaxBans int
	// MaxKeyBans bounds the bans of keys that are no address (usernames,
	// API keys), which cannot merge: their share of MaxBans, so that a
	// flood of them never leaves address bans without room, nor the
	// reverse. Less than MaxBans. Default 0: half of MaxBans.
	MaxKeyBans int
	// CoarsenIPv4 and CoarsenIPv6 are the lengths of the widest networks
	// address bans are merged into at capacity: 8 to 32 (32: never) and
	// 16 to 128. Default 0: 24 and 48. A merge never covers an address of
	// the allow list.
	CoarsenIPv4, CoarsenIPv6 int
	// MaxStrikes is how many actors' failures the jails can count at
	// once, with the memory store: the counts live apart from the rate
	// states, in a memory store of their own of about 128 bytes per
	// actor, so that no flood of rate states makes a jail forget its
	// offenders (a count it does forget is counted in
	// sluice_jail_strikes_lost_total). With a shared store the counts
	// live there. Default 0: guard.DefaultMaxBans (100,000: 12.5 MiB).
	MaxStrikes int
	// StateFile, with the memory store, is the file that keeps the bans
	// in force (with their expiry and offences) and the admin API's list
	// edits across restarts: written whole and renamed over, at most once
	// a second when they change and at shutdown; read at start, where a
	// corrupt, truncated or foreign file stops the service with an error
	// naming it (sluice serve -ignore-state-file starts without it). A
	// shared store keeps the bans itself: there it is an error. Default
	// "": bans and list edits last until the process exits.
	StateFile string
	// Notify tells of the bans, lifts and expiries of every jail, the
	// manual jail included. Default none.
	Notify []Notify
}

// A Jail bans the actors that rules deny too often: MaxFailures denials
// within FindTime ban the actor for BanTime, longer on each repeat. Zero
// fields take the defaults of guard.JailConfig.
type Jail struct {
	// Name identifies the jail: 1 to 64 letters, digits, '_', '-', '.'.
	Name string
	// Rules are the rules whose denials count as failures. At least one.
	Rules []string
	// MaxFailures denials within FindTime earn a ban. Default 5.
	MaxFailures int
	// FindTime is the window denials are counted in. Default 10m.
	FindTime time.Duration
	// BanTime is the length of a first ban. Default 10m.
	BanTime time.Duration
	// MaxBanTime caps a ban that grows with repeat offences. Default 168h.
	MaxBanTime time.Duration
	// Growth multiplies a ban's length per earlier offence. Default 2.
	Growth float64
	// Jitter lengthens each ban by a random fraction of it up to Jitter,
	// so that a botnet's bans do not all lapse at once (ban_time: 1h
	// bans for 60 to 66 minutes): as guard.JailConfig.Jitter reads it,
	// 0 is the default 0.1 and a negative value none. The file's
	// jitter is 0 to 1; jitter: 0 there means none (-1 here).
	Jitter float64
	// Notify tells of the jail's bans, lifts and expiries. Default none.
	Notify []Notify
}

// ForwardAuth configures GET /v1/auth, the endpoint of nginx
// auth_request, Traefik ForwardAuth and Caddy forward_auth.
type ForwardAuth struct {
	// Rule is the rule applied when the request names none (?rule=).
	// Default: the file's rule when it has only one; else none, and a
	// request that names no rule is answered 400 (which of several rules
	// applies is not guessed).
	Rule string
	// Key lists the parts of the key, joined by '|': "ip" (the client
	// address), "method", "path" (the original URI without its query),
	// "uri" (with it), "host", or "header:NAME". Default ["ip"].
	Key []string
	// TrustedProxies are the networks of the proxies that call the
	// endpoint and of any proxies before them: X-Forwarded-For hops they
	// appended are believed. Default loopback (127.0.0.0/8, ::1).
	TrustedProxies []netip.Prefix
	// DenyStatus is the status of a denial: 429 (Traefik and Caddy pass
	// it on) or 403 (nginx's auth_request passes only 401 and 403; map it
	// back to 429 with error_page). Default 429. ?deny_status= overrides
	// it per request.
	DenyStatus int
	// IPv6Prefix is the length of the network an IPv6 client is keyed
	// (and jailed) by, the "ip" part of the key: 1 to 128. Default 64:
	// one host owns a /64, and keying by address would give it 2^64
	// fresh allowances.
	IPv6Prefix int
	// IPv6Adaptive keys IPv6 clients by their /64 while their /48 is
	// quiet, and by the /48 once it rotates through /64s
	// (httplimit.AdaptivePrefix): a /48 grants at most 4 of its /64s a
	// key of their own within an hour; its other /64s share the /48's.
	// Never weaker than the fixed /64, at one more store call per IPv6
	// request. Default false.
	IPv6Adaptive bool
}

// Key parts of ForwardAuth.Key.
var keyParts = []string{"ip", "method", "path", "uri", "host"}

// The YAML forms of the service sections.
type (
	fileStoreSection struct {
		Type      string        `yaml:"type"`
		Memory    fileMemory    `yaml:"memory"`
		Redis     fileRedis     `yaml:"redis"`
		Memcached fileMemcached `yaml:"memcached"`
	}
	fileMemory struct {
		MaxBytes int64 `yaml:"max_bytes"`
	}
	fileRedis struct {
		Addrs        []string      `yaml:"addrs"`
		Username     string        `yaml:"username"`
		Password     string        `yaml:"password"`
		PasswordEnv  string        `yaml:"password_env"`
		PasswordFile string        `yaml:"password_file"`
		DB           int           `yaml:"db"`
		Sentinel     fileSentinel  `yaml:"sentinel"`
		InFlight     int           `yaml:"in_flight"`
		TLS          *fileRedisTLS `yaml:"tls"`
	}
	fileSentinel struct {
		Master       string   `yaml:"master"`
		Addrs        []string `yaml:"addrs"`
		Username     string   `yaml:"username"`
		Password     string   `yaml:"password"`
		PasswordEnv  string   `yaml:"password_env"`
		PasswordFile string   `yaml:"password_file"`
	}
	fileMemcached struct {
		Addrs   []string `yaml:"addrs"`
		Weights []int    `yaml:"weights"`
	}
	fileFailure struct {
		Policy    string            `yaml:"policy"`
		Timeout   time.Duration     `yaml:"timeout"`
		Instances int               `yaml:"instances"`
		Rules     map[string]string `yaml:"rules"`
	}
	fileAdmin struct {
		Listen    string         `yaml:"listen"`
		Token     string         `yaml:"token"`
		TokenEnv  string         `yaml:"token_env"`
		TokenFile string         `yaml:"token_file"`
		TLS       *fileServerTLS `yaml:"tls"`
		// The read-only token, from the file, an environment variable
		// or a file.
		ReadOnlyToken     string `yaml:"read_only_token"`
		ReadOnlyTokenEnv  string `yaml:"read_only_token_env"`
		ReadOnlyTokenFile string `yaml:"read_only_token_file"`
	}
	fileGRPC struct {
		Listen string         `yaml:"listen"`
		TLS    *fileServerTLS `yaml:"tls"`
	}
	fileGuard struct {
		Allow       []string     `yaml:"allow"`
		Deny        []string     `yaml:"deny"`
		Jails       []fileJail   `yaml:"jails"`
		MaxBans     int          `yaml:"max_bans"`
		MaxKeyBans  int          `yaml:"max_key_bans"`
		CoarsenIPv4 int          `yaml:"coarsen_ipv4"`
		CoarsenIPv6 int          `yaml:"coarsen_ipv6"`
		MaxStrikes  int          `yaml:"max_strikes"`
		StateFile   string       `yaml:"state_file"`
		Notify      []fileNotify `yaml:"notify"`
	}
	fileJail struct {
		Name        string        `yaml:"name"`
		Rules       []string      `yaml:"rules"`
		MaxFailures int           `yaml:"max_failures"`
		FindTime    time.Duration `yaml:"find_time"`
		BanTime     time.Duration `yaml:"ban_time"`
		MaxBanTime  time.Duration `yaml:"max_ban_time"`
		Growth      float64       `yaml:"growth"`
		Jitter      *float64      `yaml:"jitter"`
		Notify      []fileNotify  `yaml:"notify"`
	}
	fileForwardAuth struct {
		Rule           string   `yaml:"rule"`
		Key            []string `yaml:"key"`
		TrustedProxies []string `yaml:"trusted_proxies"`
		DenyStatus     int      `yaml:"deny_status"`
		IPv6Prefix     int      `yaml:"ipv6_prefix"`
		IPv6Adaptive   bool     `yaml:"ipv6_adaptive"`
	}
)

// store validates the store section.
func (f *fileStoreSection) store(v *validator) (Store, error) {
	s := Store{Type: f.Type, Memory: MemoryStore{MaxBytes: f.Memory.MaxBytes}}
	switch s.Type {
	case "":
		s.Type = StoreMemory
	case StoreMemory, StoreRedis, StoreMemcached:
	default:
		return s, v.errorf(at("store", "type"), "unknown store type %q%s (want %s, %s or %s)", s.Type,
			suggest.DidYouMean(s.Type, []string{StoreMemory, StoreRedis, StoreMemcached}), StoreMemory, StoreRedis, StoreMemcached)
	}
	var err error
	switch s.Type {
	case StoreRedis:
		s.Redis, err = f.Redis.redis(v)
	case StoreMemcached:
		s.Memcached, err = f.Memcached.memcached(v)
	}
	return s, err
}

// redis validates the store's redis section.
func (r *fileRedis) redis(v *validator) (RedisStore, error) {
	var errs [7]error
	s := RedisStore{Addrs: r.Addrs, Username: r.Username, DB: r.DB, InFlight: r.InFlight}
	s.Password, errs[0] = secret(v, at("store", "redis"), r.Password, r.PasswordEnv, r.PasswordFile, "password")
	st := r.Sentinel
	s.Sentinel = Sentinel{Master: st.Master, Addrs: st.Addrs, Username: st.Username}
	s.Sentinel.Password, errs[1] = secret(v, at("store", "redis", "sentinel"), st.Password, st.PasswordEnv, st.PasswordFile, "password")
	switch {
	case st.Master != "" && len(r.Addrs) > 0:
		errs[2] = v.errorf(at("store", "redis", "addrs"), "set addrs or sentinel, not both")
	case st.Master != "":
		errs[2] = addrs(v, at("store", "redis", "sentinel", "addrs"), st.Addrs)
	case len(st.Addrs) > 0:
		errs[2] = v.errorf(at("store", "redis", "sentinel"), "sentinel addrs without a master name")
	default:
		errs[2] = addrs(v, at("store", "redis", "addrs"), r.Addrs)
	}
	s.TLS, errs[3] = r.TLS.redisTLS(v)
	if r.DB < 0 {
		errs[4] = v.errorf(at("store", "redis", "db"), "db %d must not be negative", r.DB)
	}
	if r.InFlight < -1 {
		errs[5] = v.errorf(at("store", "redis", "in_flight"), "in_flight %d: want a count, 0 for the default or -1 for no queue", r.InFlight)
	}
	return s, errors.Join(errs[:]...)
}

// memcached validates the store's memcached section.
func (m *fileMemcached) memcached(v *validator) (MemcachedStore, error) {
	s := MemcachedStore(*m)
	errs := []error{addrs(v, at("store", "memcached", "addrs"), m.Addrs)}
	if len(m.Weights) > 0 && len(m.Weights) != len(m.Addrs) {
		errs = append(errs, v.errorf(at("store", "memcached", "weights"), "%d weights for %d servers: give one per server of addrs, or none", len(m.Weights), len(m.Addrs)))
	}
	for i, w := range m.Weights {
		if w < 1 {
			errs = append(errs, v.errorf(at("store", "memcached", "weights", i), "weight %d must be at least 1", w))
		}
	}
	return s, errors.Join(errs...)
}

// failure validates the failure section against the rules and domains of
// c.
func (f *fileFailure) failure(v *validator, c *Config) (Failure, error) {
	fl := Failure{Policy: sluice.FailLocal, Timeout: f.Timeout, Instances: f.Instances}
	var errs []error
	policy := func(path []any, s string) sluice.FailurePolicy {
		p, err := sluice.ParseFailurePolicy(s)
		if err != nil {
			errs = append(errs, v.errorf(path, "unknown policy %q%s (want local, open or closed)", s, suggest.DidYouMean(s, []string{"local", "open", "closed"})))
		}
		return p
	}
	if f.Policy != "" {
		fl.Policy = policy(at("failure", "policy"), f.Policy)
	}
	switch {
	case fl.Timeout == 0:
		fl.Timeout = DefaultFailureTimeout
	case fl.Timeout < 0:
		errs = append(errs, v.errorf(at("failure", "timeout"), "timeout %v must be positive", fl.Timeout))
	}
	switch {
	case fl.Instances == 0:
		fl.Instances = 1
	case fl.Instances < 0:
		errs = append(errs, v.errorf(at("failure", "instances"), "instances %d must be at least 1", fl.Instances))
	}
	if len(f.Rules) > 0 {
		fl.Rules = make(map[string]sluice.FailurePolicy, len(f.Rules))
	}
	for _, name := range slices.Sorted(maps.Keys(f.Rules)) {
		if !hasRule(c.Rules, name) && !slices.ContainsFunc(c.Domains, func(d Domain) bool { return d.Name == name }) {
			errs = append(errs, v.errorf(at("failure", "rules", name), "no rule or domain named %q%s", name, suggest.DidYouMean(name, ruleNames(c))))
			continue
		}
		fl.Rules[name] = policy(at("failure", "rules", name), f.Rules[name])
	}
	return fl, errors.Join(errs...)
}

func hasRule(rules []NamedRule, name string) bool {
	return slices.ContainsFunc(rules, func(r NamedRule) bool { return r.Name == name })
}

// ruleNames returns the names of c's rules and domains, for the one a
// misspelt name likely meant.
func ruleNames(c *Config) []string {
	var out []string
	for _, r := range c.Rules {
		out = append(out, r.Name)
	}
	for _, d := range c.Domains {
		out = append(out, d.Name)
	}
	return out
}

// noRule returns the error for a name that names no rule, with the one
// likely meant.
func noRule(v *validator, path []any, name string, rules []NamedRule) error {
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.Name
	}
	return v.errorf(path, "no rule named %q%s", name, suggest.DidYouMean(name, names))
}

// admin validates the admin section.
func (f *fileAdmin) admin(v *validator) (Admin, error) {
	token, err := secret(v, at("admin"), f.Token, f.TokenEnv, f.TokenFile, "token")
	if err != nil {
		return Admin{}, err
	}
	a := Admin{Listen: f.Listen, Token: token}
	if a.TLS, err = f.TLS.serverTLS(v, at("admin", "tls")); err != nil {
		return a, err
	}
	field := "listen" // what asks for a listener
	if f.Listen == "" {
		field = "tls"
	}
	switch {
	case token == "" && (f.Listen != "" || f.TLS != nil):
		return a, v.errorf(at("admin", field), "an admin listener needs a token (admin.token, admin.token_env or admin.token_file)")
	case token == "":
		return a, nil
	case len(token) < MinTokenLen:
		return a, v.errorf(at("admin"), "the token is %d bytes; at least %d are required", len(token), MinTokenLen)
	case strings.ContainsAny(token, " \t\r\n"):
		return a, v.errorf(at("admin"), "the token must not contain white space")
	}
	if a.ReadOnlyToken, err = f.readOnlyToken(v, token); err != nil {
		return a, err
	}
	if a.Listen == "" {
		a.Listen = DefaultAdminListen
	}
	return a, listenAddr(v, at("admin", "listen"), a.Listen)
}

// readOnlyToken reads and checks the read-only token, beside token.
func (f *fileAdmin) readOnlyToken(v *validator, token string) (string, error) {
	ro, err := secret(v, at("admin"), f.ReadOnlyToken, f.ReadOnlyTokenEnv, f.ReadOnlyTokenFile, "read_only_token")
	switch {
	case err != nil || ro == "":
		return ro, err
	case len(ro) < MinTokenLen:
		return ro, v.errorf(at("admin"), "the read-only token is %d bytes; at least %d are required", len(ro), MinTokenLen)
	case strings.ContainsAny(ro, " \t\r\n"):
		return ro, v.errorf(at("admin"), "the read-only token must not contain white space")
	case ro == token:
		return ro, v.errorf(at("admin"), "the read-only token must differ from the token")
	}
	return ro, nil
}

// grpc validates the grpc section.
func (f *fileGRPC) grpc(v *validator) (GRPC, error) {
	g := GRPC{Listen: f.Listen}
	var err error
	if g.TLS, err = f.TLS.serverTLS(v, at("grpc", "tls")); err != nil {
		return g, err
	}
	if g.Listen != "" {
		err = listenAddr(v, at("grpc", "listen"), g.Listen)
	}
	return g, err
}

// listEntries reads the entries of the guard's list name, as
// guard.ParseEntry does; the error says which entry is none.
func listEntries(v *validator, name string, in []string) ([]guard.Entry, error) {
	var out []guard.Entry
	var errs []error
	for i, s := range in {
		e, err := guard.ParseEntry(s)
		if err != nil {
			errs = append(errs, v.errorf(at("guard", name, i), "%q is not an address (203.0.113.7), a network (198.51.100.0/24) or key:NAME", s))
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// guard validates the guard section against the rules.
func (f *fileGuard) guard(v *validator, rules []NamedRule, loginJails []string) (Guard, error) {
	g := Guard{MaxBans: f.MaxBans, MaxKeyBans: f.MaxKeyBans, CoarsenIPv4: f.CoarsenIPv4, CoarsenIPv6: f.CoarsenIPv6, MaxStrikes: f.MaxStrikes, StateFile: f.StateFile}
	errs := []error{g.checkBans(v)}
	if g.MaxStrikes < 0 {
		errs = append(errs, v.errorf(at("guard", "max_strikes"), "max_strikes %d must not be negative", g.MaxStrikes))
	}
	var allowErr, denyErr error
	g.Allow, allowErr = listEntries(v, "allow", f.Allow)
	g.Deny, denyErr = listEntries(v, "deny", f.Deny)
	errs = append(errs, allowErr, denyErr)
	seen := map[string]int{}
	for i, fj := range f.Jails {
		j := Jail{Name: fj.Name, Rules: fj.Rules, MaxFailures: fj.MaxFailures, FindTime: fj.FindTime,
			BanTime: fj.BanTime, MaxBanTime: fj.MaxBanTime, Growth: fj.Growth, Jitter: jitter(fj.Jitter)}
		if err := g.jail(v, i, j, seen, rules, loginJails); err != nil {
			errs = append(errs, err)
		}
		if fj.Jitter != nil && !(*fj.Jitter >= 0 && *fj.Jitter <= 1) {
			errs = append(errs, v.errorf(at("guard", "jails", i, "jitter"), "jitter %v must be a fraction of the ban, 0 (none) to 1 (default 0.1)", *fj.Jitter))
		}
		seen[j.Name] = i
		g.Jails = append(g.Jails, j) // (for the notify sections; a Guard with errors is not returned)
	}
	return g, errors.Join(errs...)
}

// jail checks the jail j of index i against the jails before it (seen),
// the rules and the jails logins feed, and returns every mistake.
func (g *Guard) jail(v *validator, i int, j Jail, seen map[string]int, rules []NamedRule, loginJails []string) error {
	p := func(rest ...any) []any { return at(append([]any{"guard", "jails", i}, rest...)...) }
	var errs []error
	fail := func(path []any, format string, args ...any) { errs = append(errs, v.errorf(path, format, args...)) }
	if prev, dup := seen[j.Name]; dup {
		fail(p("name"), "jail %q is already defined at line %d", j.Name, v.line("guard", "jails", prev, "name"))
	} else if !ruleName.MatchString(j.Name) {
		fail(p("name"), "jail name %q must be 1 to 64 letters, digits, '_', '-' or '.'", j.Name)
	}
	if len(j.Rules) == 0 && !slices.Contains(loginJails, j.Name) {
		fail(p("rules"), "jail %q names no rules whose denials it counts, and no login feeds it: give rules: [NAME, ...]", j.Name)
	}
	for k, r := range j.Rules {
		if !hasRule(rules, r) {
			errs = append(errs, noRule(v, p("rules", k), r, rules))
		}
	}
	for _, x := range []struct {
		field string
		d     time.Duration
	}{{"find_time", j.FindTime}, {"ban_time", j.BanTime}, {"max_ban_time", j.MaxBanTime}} {
		switch {
		case x.d < 0:
			fail(p(x.field), "%s %v must not be negative", x.field, x.d)
		case x.d > sluice.MaxPeriod/2:
			fail(p(x.field), "%s %v is more than %v", x.field, x.d, sluice.MaxPeriod/2)
		}
	}
	switch {
	case j.MaxFailures < 0:
		fail(p("max_failures"), "max_failures %d must not be negative (0: the default, 5)", j.MaxFailures)
	case j.Growth < 0 || j.Growth != 0 && j.Growth < 1:
		fail(p("growth"), "growth %v must be at least 1 (0: the default, 2)", j.Growth)
	case j.MaxBanTime > 0 && j.BanTime >= 0 && j.MaxBanTime < cmp.Or(j.BanTime, 10*time.Minute):
		fail(p("max_ban_time"), "max_ban_time %v is shorter than the ban time", j.MaxBanTime)
	}
	return errors.Join(errs...)
}

// jitter returns a jail's Jitter of the file's: unset, the default (0);
// 0, none (-1).
func jitter(f *float64) float64 {
	switch {
	case f == nil:
		return 0
	case *f == 0:
		return -1
	}
	return *f
}

// checkBans validates the bounds of the ban registry.
func (g *Guard) checkBans(v *validator) error {
	maxBans := cmp.Or(g.MaxBans, 100_000) // guard.DefaultMaxBans
	var errs []error
	if g.MaxBans < 0 {
		errs = append(errs, v.errorf(at("guard", "max_bans"), "max_bans %d must not be negative", g.MaxBans))
	} else if g.MaxKeyBans < 0 || g.MaxKeyBans >= maxBans {
		errs = append(errs, v.errorf(at("guard", "max_key_bans"), "max_key_bans %d must be 0 (half of max_bans) to %d, less than max_bans", g.MaxKeyBans, maxBans-1))
	}
	if g.CoarsenIPv4 != 0 && (g.CoarsenIPv4 < 8 || g.CoarsenIPv4 > 32) {
		errs = append(errs, v.errorf(at("guard", "coarsen_ipv4"), "coarsen_ipv4 %d must be 8 to 32 (default 24)", g.CoarsenIPv4))
	}
	if g.CoarsenIPv6 != 0 && (g.CoarsenIPv6 < 16 || g.CoarsenIPv6 > 128) {
		errs = append(errs, v.errorf(at("guard", "coarsen_ipv6"), "coarsen_ipv6 %d must be 16 to 128 (default 48)", g.CoarsenIPv6))
	}
	return errors.Join(errs...)
}

// forwardAuth validates the forward_auth section against the rules.
func (f *fileForwardAuth) forwardAuth(v *validator, rules []NamedRule) (ForwardAuth, error) {
	fa := ForwardAuth{Rule: f.Rule, Key: f.Key, DenyStatus: f.DenyStatus, IPv6Prefix: f.IPv6Prefix, IPv6Adaptive: f.IPv6Adaptive}
	var errs []error
	fail := func(path []any, format string, args ...any) { errs = append(errs, v.errorf(path, format, args...)) }
	if fa.Rule == "" {
		if len(rules) == 1 { // the only rule: no doubt which applies
			fa.Rule = rules[0].Name
		}
	} else if !hasRule(rules, fa.Rule) {
		errs = append(errs, noRule(v, at("forward_auth", "rule"), fa.Rule, rules))
	}
	if len(fa.Key) == 0 {
		fa.Key = []string{"ip"}
	}
	for i, k := range fa.Key {
		if h, ok := strings.CutPrefix(k, "header:"); ok && validHeader(h) || slices.Contains(keyParts, k) {
			continue
		}
		fail(at("forward_auth", "key", i), "unknown key part %q%s (want %s or header:NAME)", k, suggest.DidYouMean(k, keyParts), strings.Join(keyParts, ", "))
	}
	if len(f.TrustedProxies) == 0 {
		fa.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	for i, s := range f.TrustedProxies {
		p, err := guard.ParsePrefix(s)
		if err != nil {
			fail(at("forward_auth", "trusted_proxies", i), "%q is not an address (10.0.0.1) or a network (10.0.0.0/8)", s)
			continue
		}
		fa.TrustedProxies = append(fa.TrustedProxies, p)
	}
	switch fa.DenyStatus {
	case 0:
		fa.DenyStatus = 429
	case 429, 403:
	default:
		fail(at("forward_auth", "deny_status"), "deny_status %d must be 429 or 403 (for nginx's auth_request)", fa.DenyStatus)
	}
	switch {
	case fa.IPv6Prefix == 0:
		fa.IPv6Prefix = 64
	case fa.IPv6Prefix < 1 || fa.IPv6Prefix > 128:
		fail(at("forward_auth", "ipv6_prefix"), "ipv6_prefix %d must be 1 to 128", fa.IPv6Prefix)
	case fa.IPv6Adaptive && f.IPv6Prefix != 0:
		fail(at("forward_auth", "ipv6_adaptive"), "set ipv6_prefix or ipv6_adaptive, not both")
	}
	return fa, errors.Join(errs...)
}

// validHeader reports whether h is a plausible header field name.
func validHeader(h string) bool {
	if h == "" || len(h) > 128 {
		return false
	}
	for _, c := range h {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// addrs checks a non-empty list of host:port addresses.
func addrs(v *validator, path []any, list []string) error {
	if len(list) == 0 {
		return v.errorf(path, "at least one address (host:port) is required")
	}
	var errs []error
	for i, a := range list {
		host, port, err := net.SplitHostPort(a)
		if err == nil && host == "" {
			err = fmt.Errorf("no host")
		}
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil {
			errs = append(errs, v.errorf(append(path[:len(path):len(path)], i), "%q is not host:port, such as 10.0.0.5:6379: %v", a, err))
		}
	}
	return errors.Join(errs...)
}

// listenAddr checks a listening address, host:port with a port from 0 to
// 65535.
func listenAddr(v *validator, path []any, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return v.errorf(path, "%q is not host:port, such as 127.0.0.1:8080: %v", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return v.errorf(path, "port %q is not a number from 0 to 65535", port)
	}
	return nil
}
