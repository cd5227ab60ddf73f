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
// [Default] returns the built-in sample rule set, [Sample] its YAML.
package config
