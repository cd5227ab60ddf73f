package memcached

import (
	"crypto/md5"
	"slices"
	"strconv"
)

// A ring places keys on servers by ketama consistent hashing, as libketama
// and the clients compatible with it (libmemcached's ketama mode,
// spymemcached's, pylibmc's, twemproxy's) do: each server gets points on
// a 32-bit circle, from the MD5 digests of "addr-0", "addr-1", …, in number
// proportional to its weight, and a key belongs to the first point at or
// after the first four bytes of its MD5 digest (little-endian), wrapping
// round. Adding or removing one of N servers moves only about 1/N of the
// keys, where hashing modulo N moves most of them.
//
// A ring is immutable once built, so safe for concurrent use.
type ring struct {
	points  []uint32
	servers []int // servers[i] is the index of the server owning points[i]
	n       int   // number of servers
}

// newRing builds the ring of addrs with the given weights (all equal when
// weights is nil).
func newRing(addrs []string, weights []int) *ring {
	total := 0
	for i := range addrs {
		total += weightOf(weights, i)
	}
	r := &ring{n: len(addrs)}
	type point struct {
		p      uint32
		server int
	}
	var pts []point
	for i, addr := range addrs {
		// libketama computes this in single precision; so do we, so that
		// uneven weights give exactly its number of points.
		pct := float32(weightOf(weights, i)) / float32(total)
		ks := int(pct * 40 * float32(len(addrs)))
		for k := range ks {
			d := md5.Sum([]byte(addr + "-" + strconv.Itoa(k)))
			for h := range 4 {
				pts = append(pts, point{le32(d[h*4:]), i})
			}
		}
	}
	slices.SortStableFunc(pts, func(a, b point) int {
		switch {
		case a.p < b.p:
			return -1
		case a.p > b.p:
			return 1
		}
		return 0
	})
	for _, p := range pts {
		r.points = append(r.points, p.p)
		r.servers = append(r.servers, p.server)
	}
	return r
}

func weightOf(weights []int, i int) int {
	if i < len(weights) && weights[i] > 0 {
		return weights[i]
	}
	return 1
}

func le32(b []byte) uint32 {
	return uint32(b[3])<<24 | uint32(b[2])<<16 | uint32(b[1])<<8 | uint32(b[0])
}

// hashKey is ketama's hash of a key: the first four bytes of its MD5
// digest, little-endian.
func hashKey(key string) uint32 {
	d := md5.Sum([]byte(key))
	return le32(d[:])
}

// server returns the index of the server that owns key.
func (r *ring) server(key string) int {
	if r.n <= 1 {
		return 0
	}
	h := hashKey(key)
	i, _ := slices.BinarySearch(r.points, h)
	if i == len(r.points) {
		i = 0
	}
	return r.servers[i]
}
