package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// envoyFile is the YAML form of one envoyproxy/ratelimit configuration
// file: a domain and its descriptors.
type envoyFile struct {
	Domain      string           `yaml:"domain"`
	Descriptors []fileDescriptor `yaml:"descriptors"`
}

// envoyFormat reports whether data is an envoyproxy/ratelimit file: a
// mapping with a top-level domain key, which sluice's own files do not
// have. Malformed YAML is not: Parse reports its error.
func envoyFormat(data []byte) bool {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return false
	}
	top := root.Content[0]
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
		return nil, err
	}
	var base *Config
	var baseName string
	var domains []Domain
	var errs []error
	for _, e := range entries {
		name := e.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if e.IsDir() || strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		c, err := parse(path, data, true, ck)
		if err != nil {
			errs = append(errs, err)
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
			return nil, fmt.Errorf("%s: a second sluice configuration in %s (the first is %s): put the settings in one file, Envoy domains in others", path, dir, baseName)
		}
		base, baseName = c, path
		domains = append(c.Domains, domains...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if base == nil {
		return nil, fmt.Errorf("%s: no *.yaml or *.yml configuration files", dir)
	}
	if len(base.Rules)+len(domains) == 0 {
		return nil, fmt.Errorf("%s: no rules: the directory's files define no rule or domain", dir)
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
	for _, d := range domains {
		if prev, dup := where[d.Name]; dup {
			return nil, fmt.Errorf("%s: domain %q is already defined (%s)", d.Source, d.Name, prev)
		}
		where[d.Name] = d.Source
	}
	return &out, nil
}
