package rlqs

import (
	"net/url"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/config"
)

// A bucketID is a bucket id as the service keys it: its entries sorted by
// key, each escaped as in a URL query and joined, "env=prod&name=api". Two
// ids with the same entries in any order are the same bucket, as the
// protocol says.
type bucketID string

// idSize reports whether the entries of id fit the bounds the service
// tracks (config.MaxBucketEntries, config.MaxBucketBytes), and whether
// every key and value is non-empty (the protocol's rule).
func idSize(id map[string]string) (fits, valid bool) {
	n := 0
	valid = len(id) > 0
	for k, v := range id {
		n += len(k) + len(v)
		valid = valid && k != "" && v != ""
	}
	return len(id) <= config.MaxBucketEntries && n <= config.MaxBucketBytes, valid
}

// keyOf returns the key of id; its size must fit the bounds (idSize).
func keyOf(id map[string]string) bucketID {
	keys := make([]string, 0, len(id))
	for k := range id {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(id[k]))
	}
	return bucketID(b.String())
}

// match returns the first bucket of q for domain that id matches, or nil.
func match(q *config.Quota, domain string, id map[string]string) *config.QuotaBucket {
	for i := range q.Buckets {
		b := &q.Buckets[i]
		if b.Domain == domain && matches(b.Match, id) {
			return b
		}
	}
	return nil
}

// matches reports whether id has every entry of want.
func matches(want, id map[string]string) bool {
	for k, v := range want {
		if id[k] != v {
			return false
		}
	}
	return true
}
