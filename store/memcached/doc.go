// Package memcached is a sluice.Store that keeps limiter state in
// memcached, on one server or over a fleet.
package memcached
