// Package config reads the configuration of sluice serve: which store keeps
// the limiter state, where the service listens, and the named rules that
// clients ask about.
//
// A configuration is YAML:
//
//	store: {type: memory}
//	listen: 127.0.0.1:8080
//	rules:
//	  - name: login
//	    limits: ["5/min", "20/h"]   # all must allow
//	  - name: api
//	    limits: ["100/s burst 200"]
//
// Limits are written in the syntax of [sluice.ParseLimit]. Parsing is
// strict: an unknown field, a malformed limit, a missing or duplicate
// rule name, or a policy the store could not apply is an error that names
// the file, the line and the field, as in
//
//	sluice.yaml:7: rules[1].limits[0]: limit "100/sec burst -1": ...
//
// # Descriptor domains
//
// A rule may instead be a domain of descriptors, in the format of
// envoyproxy/ratelimit (see [Domain] for the matching rules):
//
//	rules:
//	  - domain: edge
//	    descriptors:
//	      - key: remote_address
//	        limits: ["30/5m sliding"]        # or Envoy's rate_limit block
//	      - key: remote_address
//	        value: 50.0.0.5
//	        rate_limit: {unit: second, requests_per_unit: 0}
//
// envoyproxy/ratelimit's own files (a top-level domain and descriptors)
// load unchanged, alone or as a directory ([LoadDir]).
//
// [Default] returns the built-in sample rule set, [Sample] its YAML.
package config
