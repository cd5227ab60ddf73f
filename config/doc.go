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
// strict, and reports every mistake of a file at once, as [Errors]: an
// unknown field (with the one likely meant), a value of the wrong kind, a
// malformed limit or duration, a missing or duplicate rule name, a policy
// the store could not apply. Each names the file, the line and column,
// and the field, says what is wrong and what to write instead:
//
//	sluice.yaml:5:5: rules[0]: unknown field "limts"; did you mean "limits"? (rules[0] takes name, limits, ...)
//	sluice.yaml:7:29: rules[1].limits[1]: limit "10/fortnight": period "fortnight" is not a unit (s, min, h, day, week) or a duration (5m, 1h30m, 2d)
//	sluice.yaml:11:12: failure.timeout: "5 minutes" is not a duration: write a number and a unit (ns, us, ms, s, m, h) without a space, such as 300ms, 10m or 168h; did you mean "5m"?
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
// # TLS and secrets
//
// Each listener has its own TLS block, none inherited: tls for listen,
// grpc.tls for grpc.listen, admin.tls for admin.listen (see [ServerTLS];
// client_ca_file turns on mutual TLS). store.redis.tls connects to Redis
// over TLS (see [RedisTLS]):
//
//	tls: {cert_file: tls.crt, key_file: tls.key, min_version: "1.3"}
//	grpc:
//	  listen: 0.0.0.0:8082
//	  tls: {cert_file: tls.crt, key_file: tls.key, client_ca_file: envoy-ca.crt}
//	store:
//	  type: redis
//	  redis:
//	    addrs: ["redis.internal:6380"]
//	    username: sluice
//	    password_file: /run/secrets/redis
//	    tls: {ca_file: redis-ca.crt}
//
// Relative paths are read from the configuration file's directory, and
// every file is read and checked when the configuration is loaded.
// Secrets (store.redis.password, its sentinel's, admin.token) may be
// written in the file, or named: NAME_env for an environment variable,
// NAME_file for a file whose contents, without a trailing line break, are
// the secret; at most one of the three.
//
// [Default] returns the built-in sample rule set, [Sample] its YAML.
package config
