// Package banfield names a ban in the shared stores of the guard's ban
// registries (guard/redisbans, guard/memcachedbans): one string for a
// jail and a key, whatever bytes either holds.
package banfield

import (
	"strconv"
	"strings"
)

// Name returns the field of key in jail: the jail's length, a colon,
// the jail, then the key, so that any bytes in either stay apart.
func Name(jail, key string) string {
	return strconv.Itoa(len(jail)) + ":" + jail + key
}

// Parse splits a field made by Name into jail and key, or returns false
// if f is not one.
func Parse(f string) (jail, key string, ok bool) {
	n, rest, ok := strings.Cut(f, ":")
	if !ok {
		return "", "", false
	}
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 || l > len(rest) {
		return "", "", false
	}
	return rest[:l], rest[l:], true
}
