package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// envoyFile is the YAML form of one envoyproxy/ratelimit configuration
// file: a domain and its descriptors.
type envoyFile struct {
	Domain      string           `yaml:"domain"`
	Descriptors []fileDescriptor `yaml:"descriptors"`
}

// envoyFormat reports whether data is an envoyproxy/ratelimit file (see
// isEnvoy). Malformed YAML is not: Parse reports its error.
func envoyFormat(data []byte) bool {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return false
	}
	return isEnvoy(root.Content[0])
}

// isEnvoy reports whether top, a file's top-level node, is of an
// envoyproxy/ratelimit file: a mapping with a top-level domain key,
// which sluice's own files do not have.
func isEnvoy(top *yaml.Node) bool {
	return top.Kind == yaml.MappingNode && child(top, "domain") != nil
}

// LoadDir reads a directory of configuration files the way
// envoyproxy/ratelimit reads its config directory, so that its users can
// point sluice at the directory they have: every *.yaml and *.yml file in
// it (not in subdirectories; hidden files skipped), in name order. Files
// in Envoy's format (a top-level domain) each add their domain; at most
// one file may be in sluice's own format, and it gives the settings (a
// store, listeners) and named rules, if any. With no such file, the
// settings are the defaults.
//
// A domain defined twice, or named like a rule, is an error that names
// both files.
func LoadDir(dir string) (*Config, error) {
	return loadDir(dir, &checks{})
}

// loadDir is LoadDir; it reports the errors of every file.
func loadDir(dir string, ck *checks) (*Config, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, Errors{{File: dir, Err: unwrapPath(err)}}
	}
	var base *Config
	var baseName string
	var domains []Domain
	var errs Errors
	for _, e := range entries {
		name := e.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if e.IsDir() || strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, &Error{File: path, Err: unwrapPath(err)})
			continue
		}
		c, err := parse(path, data, true, ck)
		if err != nil {
			errs = append(errs, errorsOf(path, err)...)
			continue
		}
		if envoyFormat(data) {
			domains = append(domains, c.Domains...)
			if base == nil {
				base = c
			}
			continue
		}
		if baseName != "" {
			errs = append(errs, &Error{File: path, Err: fmt.Errorf("a second sluice configuration in %s (the first is %s): put the settings in one file, Envoy domains in others", dir, baseName)})
			continue
		}
		base, baseName = c, path
		domains = append(c.Domains, domains...)
	}
	switch {
	case len(errs) > 0:
		return nil, errs
	case base == nil:
		return nil, Errors{{File: dir, Err: errors.New("no *.yaml or *.yml configuration files in this directory")}}
	case len(base.Rules)+len(domains) == 0:
		return nil, Errors{{File: dir, Err: errors.New("no rules: the directory's files define no rule or domain")}}
	}
	return base.withDomains(domains)
}

// withDomains returns a copy of c with domains (c's own and those of
// other files), checked for names used twice.
func (c *Config) withDomains(domains []Domain) (*Config, error) {
	out := *c
	out.Domains = domains
	where := make(map[string]string, len(domains)+len(c.Rules))
	for _, r := range c.Rules {
		where[r.Name] = "a rule"
	}
	var errs Errors
	for _, d := range domains {
		if prev, dup := where[d.Name]; dup {
			file, line := d.Source, 0
			if i := strings.LastIndexByte(d.Source, ':'); i >= 0 {
				if n, err := strconv.Atoi(d.Source[i+1:]); err == nil {
					file, line = d.Source[:i], n
				}
			}
			errs = append(errs, &Error{File: file, Line: line, Err: fmt.Errorf("domain %q is already defined (%s)", d.Name, prev)})
			continue
		}
		where[d.Name] = d.Source
	}
	if errs != nil {
		return nil, errs
	}
	return &out, nil
}
