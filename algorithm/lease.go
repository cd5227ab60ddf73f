package algorithm

import (
	"encoding/binary"
	"errors"
	"slices"
)

// A LeaseTable is the state of one key of a concurrency limit: the leases
// granted on it, each an ID and an expiry in Unix nanoseconds. A lease is
// live while now < its expiry. The methods take the time and read no
// clock; every call drops the leases that have expired first, so a table
// never counts a lease past its expiry. store/memcached applies exactly
// these semantics; store/memory's tables (which also grant leases by
// ref) and the Redis script lease.lua are their twins, held to them by
// store/storetest.RunLeases.
//
// The zero value is an empty table. A LeaseTable is not safe for
// concurrent use: the store serialises the calls on one key.
type LeaseTable struct {
	Leases []Lease
}

// A Lease is one entry of a LeaseTable.
type Lease struct {
	ID  string
	Exp int64 // Unix ns; live while now < Exp
}

// Prune drops the leases that have expired at now and returns how many
// it dropped.
func (t *LeaseTable) Prune(now int64) int {
	n := len(t.Leases)
	t.Leases = slices.DeleteFunc(t.Leases, func(l Lease) bool { return l.Exp <= now })
	return n - len(t.Leases)
}

// Acquire grants lease id until exp if fewer than ceiling leases are live
// at now, or renews it until exp if it is live already. It reports
// whether id holds a lease after the call.
func (t *LeaseTable) Acquire(id string, ceiling int, now, exp int64) bool {
	t.Prune(now)
	if i := t.find(id); i >= 0 {
		t.Leases[i].Exp = max(t.Leases[i].Exp, exp)
		return true
	}
	if len(t.Leases) >= ceiling {
		return false
	}
	t.Leases = append(t.Leases, Lease{ID: id, Exp: exp})
	return true
}

// Release ends lease id and reports whether it was live at now.
func (t *LeaseTable) Release(id string, now int64) bool {
	t.Prune(now)
	i := t.find(id)
	if i < 0 {
		return false
	}
	t.Leases = slices.Delete(t.Leases, i, i+1)
	return true
}

// Extend moves the expiry of the live lease id to exp, and reports
// whether it was live at now; an expired lease is not revived.
func (t *LeaseTable) Extend(id string, now, exp int64) bool {
	t.Prune(now)
	i := t.find(id)
	if i < 0 {
		return false
	}
	t.Leases[i].Exp = exp
	return true
}

// Expires returns the expiry of lease id, or 0 if the table does not hold
// it.
func (t *LeaseTable) Expires(id string) int64 {
	if i := t.find(id); i >= 0 {
		return t.Leases[i].Exp
	}
	return 0
}

// Earliest returns the earliest expiry of the table's leases, or 0 for an
// empty table.
func (t *LeaseTable) Earliest() int64 {
	var e int64
	for _, l := range t.Leases {
		if e == 0 || l.Exp < e {
			e = l.Exp
		}
	}
	return e
}

// Latest returns the latest expiry of the table's leases, or 0 for an
// empty table: when the whole table can be forgotten.
func (t *LeaseTable) Latest() int64 {
	var e int64
	for _, l := range t.Leases {
		e = max(e, l.Exp)
	}
	return e
}

func (t *LeaseTable) find(id string) int {
	return slices.IndexFunc(t.Leases, func(l Lease) bool { return l.ID == id })
}

// leaseTableVersion starts every encoded LeaseTable.
const leaseTableVersion = 1

// ErrCorruptLeases is the error of DecodeLeaseTable for bytes that are
// not an encoded LeaseTable.
var ErrCorruptLeases = errors.New("corrupt lease table")

// AppendBinary appends the encoding of t to b: a version byte, then per
// lease its expiry (8 bytes, little-endian), its ID's length (1 byte) and
// its ID.
func (t *LeaseTable) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, leaseTableVersion)
	for _, l := range t.Leases {
		if len(l.ID) == 0 || len(l.ID) > 255 {
			return nil, ErrCorruptLeases
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(l.Exp))
		b = append(b, byte(len(l.ID)))
		b = append(b, l.ID...)
	}
	return b, nil
}

// DecodeLeaseTable decodes what AppendBinary encoded, holding at most max
// leases: a longer or malformed table is ErrCorruptLeases, never a panic
// or an allocation larger than b.
func DecodeLeaseTable(b []byte, max int) (LeaseTable, error) {
	var t LeaseTable
	if len(b) == 0 || b[0] != leaseTableVersion {
		return t, ErrCorruptLeases
	}
	for b = b[1:]; len(b) > 0; {
		if len(b) < 9 || len(t.Leases) == max {
			return LeaseTable{}, ErrCorruptLeases
		}
		exp, n := int64(binary.LittleEndian.Uint64(b)), int(b[8])
		if exp <= 0 || n == 0 || len(b) < 9+n {
			return LeaseTable{}, ErrCorruptLeases
		}
		t.Leases = append(t.Leases, Lease{ID: string(b[9 : 9+n]), Exp: exp})
		b = b[9+n:]
	}
	return t, nil
}
