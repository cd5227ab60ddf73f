package config

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
)

// DefaultListen is the address sluice serve listens on when neither the
// configuration nor the command line names one: loopback only, so that a
// service started with no configuration is not exposed by accident.
const DefaultListen = "127.0.0.1:8080"

// MaxSize bounds a configuration file, so a wrong path (a log, a disk
// image) fails fast instead of filling memory.
const MaxSize = 4 << 20

// A Config is a parsed and validated configuration. Build one with
// [Parse], [Load] or [Default]; the zero value has no rules. A Config is
// not modified by this package after it is returned, so it may be shared
// between goroutines that only read it.
type Config struct {
	// Store chooses where limiter state lives.
	Store Store
	// Listen is the address sluice serve listens on, host:port. Default
	// DefaultListen.
	Listen string
	// TLS, when set, serves the Listen listener over TLS (with
	// ClientCAFile: mutual TLS). Default nil: plain text.
	TLS *ServerTLS
	// GRPC configures the listener of Envoy's rate limit gRPC API.
	GRPC GRPC
	// Rules are the named policies clients ask about, in file order,
	// with unique names. A configuration has at least one rule or domain.
	Rules []NamedRule
	// Domains are the descriptor rule trees (Envoy's format), in file
	// order, with names unique among domains and rules.
	Domains []Domain
	// Concurrency are the rules that limit requests in flight (a rule
	// with a concurrency block), in file order, with names unique among
	// every rule and domain.
	Concurrency []ConcurrencyRule
	// Failure is what rules answer while a shared store fails.
	Failure Failure
	// Admin configures the admin API; off by default.
	Admin Admin
	// Guard holds the allow and deny lists and the jails.
	Guard Guard
	// ForwardAuth configures GET /v1/auth for proxies.
	ForwardAuth ForwardAuth
	// Logins are the login rules (see Login).
	Logins []Login
	// Telemetry configures OpenTelemetry (OTLP); off by default.
	Telemetry Telemetry
	// Quota configures the edge quotas (Envoy's RLQS, the Go client's
	// local quotas); no buckets by default.
	Quota Quota
}

// A NamedRule is a rule of the file's rules section, asked by its name and
// a key (an address, a username): a request under it is allowed only if
// every one of its limits allows it.
type NamedRule struct {
	// Name identifies the rule in requests. It is also the action of
	// the rule's limiter, so it is part of every key the rule stores:
	// 1 to 64 letters, digits, '_', '-' or '.'.
	Name string
	// Limits is the policy; at least one, no two sharing a
	// sluice.Limit.StateID (the same algorithm and period).
	Limits []sluice.Limit
	// Shadow decides and counts as usual but never denies (a dry run):
	// answers say the request is allowed and report it as shadowed.
	// Default false.
	Shadow bool
}

// Rule returns the rule named name, and whether there is one.
func (c *Config) Rule(name string) (NamedRule, bool) {
	for _, r := range c.Rules {
		if r.Name == name {
			return r, true
		}
	}
	return NamedRule{}, false
}

//go:embed sample.yaml
var sample []byte

// Sample returns the YAML of the built-in sample rule set: the rules
// [Default] returns, with comments. Write it to a file to start a
// configuration of your own.
func Sample() []byte { return bytes.Clone(sample) }

// Default returns the built-in sample configuration, which sluice serve
// uses when it is given no configuration file. The sample is tested, so
// the error is only for a binary built from a broken sample.
func Default() (*Config, error) {
	return Parse("sample.yaml", sample)
}

// Load reads and parses the configuration file at path (see [Parse]). A
// directory is read as envoyproxy/ratelimit reads its config directory:
// see [LoadDir].
func Load(path string) (*Config, error) {
	return load(path, &checks{})
}

// Validate is Load for checking a configuration without serving it, as
// "sluice config validate" does: an environment variable that a secret
// names (admin.token_env, a password_env) and that is unset here is a
// warning, not an error, since the machine that validates need not hold
// the production secrets. The Config then holds a placeholder for the
// secret, and is for reading only.
func Validate(path string) (c *Config, warnings []string, err error) {
	ck := &checks{lenientSecrets: true}
	c, err = load(path, ck)
	return c, ck.warnings, err
}

// checks is how a load treats what the machine lacks, and what it found
// that is not an error.
type checks struct {
	lenientSecrets bool     // an unset secret's variable is a warning
	warnings       []string // what a lenient load let through
}

func load(path string, ck *checks) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Errors{{File: path, Err: unwrapPath(err)}}
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return loadDir(path, ck)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, Errors{{File: path, Err: unwrapPath(err)}}
	}
	return parse(path, data, false, ck)
}

// unwrapPath drops the path an *fs.PathError repeats, which the Error
// already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot %s it: %w", pe.Op, pe.Err)
	}
	return err
}

// Parse parses and validates a configuration. name is the file name used
// in error messages. The error is Errors: every mistake of the file, each
// naming the file, the line and column, and the field at fault, with what
// to write instead.
func Parse(name string, data []byte) (*Config, error) {
	return parse(name, data, false, &checks{})
}

// parse is Parse; inDir parses a file of a directory (see LoadDir), whose
// rules may all be in other files.
func parse(name string, data []byte, inDir bool, ck *checks) (*Config, error) {
	if len(data) > MaxSize {
		return nil, Errors{{File: name, Err: fmt.Errorf("larger than %d bytes: is it a configuration?", MaxSize)}}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errors{{File: name, Err: errEmpty}}
		}
		return nil, yamlError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(name, err)
		}
		return nil, Errors{{File: name, Line: extra.Line, Column: extra.Column,
			Err: errors.New(`only one YAML document is allowed: remove the "---" and what follows, or put it in a file of its own`)}}
	}
	top := &root
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		top = root.Content[0]
	}
	f := file{inDir: inDir}
	var target any = &f
	if isEnvoy(top) {
		f.envoy = new(envoyFile)
		target = f.envoy
	}
	// The shape first: every unknown field and value of the wrong kind,
	// where the YAML library's strict decoding stops at the first. The
	// lenient decoding then fills what is well formed, and the semantic
	// checks run on it, so that one run reports both kinds of mistakes.
	v := &validator{name: name, root: &root, checks: ck}
	sc := &shapeChecker{v: v, seen: map[checked]bool{}}
	sc.check(top, reflect.TypeOf(target).Elem(), nil)
	if err := top.Decode(target); err != nil && len(sc.errs) == 0 {
		return nil, yamlError(name, err) // refused what the checker let through: in the library's words
	}
	c, err := f.config(v)
	errs := errorsOf(name, errors.Join(sc.errs...))
	for _, e := range errorsOf(name, err) {
		if !explained(e, sc.causes) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	return c, nil
}

// file is the YAML form of a Config.
type file struct {
	Store       fileStoreSection `yaml:"store"`
	Listen      string           `yaml:"listen"`
	TLS         *fileServerTLS   `yaml:"tls"`
	GRPC        fileGRPC         `yaml:"grpc"`
	Rules       []fileRule       `yaml:"rules"`
	Failure     fileFailure      `yaml:"failure"`
	Admin       fileAdmin        `yaml:"admin"`
	Guard       fileGuard        `yaml:"guard"`
	ForwardAuth fileForwardAuth  `yaml:"forward_auth"`
	Logins      []fileLogin      `yaml:"logins"`
	Telemetry   fileTelemetry    `yaml:"telemetry"`
	Quota       fileQuota        `yaml:"quota"`

	// envoy holds the file when it is in Envoy's format (a domain and
	// its descriptors), whose settings are all defaults.
	envoy *envoyFile
	// inDir marks a file of a directory, which may have no rules.
	inDir bool
}

type fileRule struct {
	Name        string           `yaml:"name"`
	Limits      []string         `yaml:"limits"`
	Shadow      bool             `yaml:"shadow"`
	Domain      string           `yaml:"domain"`
	Descriptors []fileDescriptor `yaml:"descriptors"`
	Concurrency *fileConcurrency `yaml:"concurrency"`
}

var ruleName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// config validates every section of f, and returns the errors of all
// that are at fault: a file with three mistakes takes one run to fix.
func (f *file) config(v *validator) (*Config, error) {
	c := &Config{Listen: f.Listen}
	var errs [7]error
	c.Store, errs[0] = f.Store.store(v)
	if c.Listen == "" {
		c.Listen = DefaultListen
	} else {
		errs[1] = listenAddr(v, at("listen"), c.Listen)
	}
	var tlsErr, grpcErr error
	c.TLS, tlsErr = f.TLS.serverTLS(v, at("tls"))
	c.GRPC, grpcErr = f.GRPC.grpc(v)
	errs[6] = errors.Join(tlsErr, grpcErr)
	errs[2] = f.rules(v, c) // the sections below may name its rules
	c.Failure, errs[3] = f.Failure.failure(v, c)
	c.Admin, errs[4] = f.Admin.admin(v)
	var guardErr, authErr, loginErr error
	c.Guard, guardErr = f.Guard.guard(v, c.Rules, loginJails(f.Logins))
	if c.Guard.StateFile != "" && c.Store.Type != "" && c.Store.Type != StoreMemory {
		guardErr = errors.Join(guardErr, v.errorf(at("guard", "state_file"), "the %s store keeps the bans itself: a state file is for the memory store", c.Store.Type))
	}
	guardErr = errors.Join(guardErr, f.Guard.notifications(v, &c.Guard))
	c.ForwardAuth, authErr = f.ForwardAuth.forwardAuth(v, c.Rules)
	c.Logins, loginErr = logins(v, f.Logins, c.Guard)
	var telemetryErr error
	c.Telemetry, telemetryErr = f.Telemetry.telemetry(v)
	errs[5] = errors.Join(guardErr, authErr, loginErr, telemetryErr)
	var quotaErr error
	c.Quota, quotaErr = f.Quota.quota(v, c)
	errs[5] = errors.Join(errs[5], quotaErr)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return c, nil
}

// validator builds errors that name the file, line, column and field.
type validator struct {
	name string
	root *yaml.Node
	*checks
}

// errorf returns the Error "file:line:column: path: message" for the
// field at path, a list of mapping keys and sequence indexes built with
// at. The format may wrap an error with %w.
func (v *validator) errorf(path []any, format string, args ...any) error {
	n := v.node(path...)
	return &Error{File: v.name, Line: n.Line, Column: n.Column, Path: fieldPath(path), Err: plain(fmt.Errorf(format, args...))}
}

// at returns the path of a field: at("rules", 1, "limits").
func at(path ...any) []any { return path }

// line returns the line of the value at path, or of the deepest node on
// the path that exists (a missing field is reported where its parent is).
func (v *validator) line(path ...any) int { return v.node(path...).Line }

// node returns the value at path, or the deepest node on the path that
// exists.
func (v *validator) node(path ...any) *yaml.Node {
	n := v.root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, p := range path {
		next := child(n, p)
		if next == nil {
			break
		}
		n = next
	}
	return n
}

// child returns the value under key p (a string, in a mapping) or at
// index p (an int, in a sequence), or nil.
func child(n *yaml.Node, p any) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch p := p.(type) {
	case string:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == p {
				return n.Content[i+1]
			}
		}
	case int:
		if n.Kind == yaml.SequenceNode && p < len(n.Content) {
			return n.Content[p]
		}
	}
	return nil
}

// fieldPath writes a path as rules[1].limits[0].
func fieldPath(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, p)
		}
	}
	return b.String()
}

// yamlError rewrites an error of the YAML library, which stops at its
// first: "file:line: message", without the names of this package's
// types.
func yamlError(name string, err error) Errors {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var out Errors
	for _, m := range msgs {
		e := &Error{File: name}
		if rest, ok := strings.CutPrefix(m, "line "); ok {
			if num, msg, ok := strings.Cut(rest, ": "); ok {
				e.Line, _ = strconv.Atoi(num)
				m = msg
			}
		}
		if te == nil {
			m = "the YAML does not parse: " + m
		}
		e.Err = errors.New(internalType.ReplaceAllString(m, "${1} this field"))
		out = append(out, e)
	}
	return out
}

// internalType matches the names of this package's types in the YAML
// library's messages.
var internalType = regexp.MustCompile(`(in type|into) (\[\])?(map\[string\])?\*?config\.\w+`)

// sortErrors sorts the mistakes of one file by their place in it.
func sortErrors(es Errors) {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}
