package memcachedbans

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
)

// The first byte of an encoded page: its format. A page of format 2
// adds to each entry its ban's collateral (guard.Ban.Collateral); pages
// that hold none are written in format 1, which processes of earlier
// versions read, so that a fleet upgraded one process at a time stays
// in agreement until a coarsening.
const (
	pageFormat1 = 1
	pageFormat2 = 2
)

// pruneGrace is how long after its end an entry stays in its page: a
// process whose clock is behind would otherwise write back a ban that
// another process pruned.
const pruneGrace = time.Minute

// An entry is what a page holds per jail and key: a ban, or a lift that
// is kept until the lifted ban would have ended, so that no process
// writes the ban back. Of two entries of one jail and key, the newer
// wins (see newer).
type entry struct {
	ban    guard.Ban // a lift's holds the jail, key and end of the ban it lifted
	lifted bool
	// into is, for a ban lifted because a coarsening merged it, the key
	// of the network ban it was merged into: a replica that has not seen
	// that ban yet covers the address with it before it lifts the ban.
	into  string
	stamp int64 // when it was written, in Unix ns by the writer's clock
}

// compareEntries orders entries of one jail and key from older to newer:
// by stamp, then a lift after a ban, then by end, then by encoding, so
// that every process picks the same winner.
func compareEntries(a, b entry) int {
	if sameEntry(a, b) {
		return 0
	}
	if c := cmp.Compare(a.stamp, b.stamp); c != 0 {
		return c
	}
	if a.lifted != b.lifted {
		if a.lifted {
			return 1
		}
		return -1
	}
	if c := a.ban.Until.Compare(b.ban.Until); c != 0 {
		return c
	}
	return bytes.Compare(appendEntry(nil, "", a, pageFormat2), appendEntry(nil, "", b, pageFormat2))
}

// sameEntry reports whether a and b are the same entry.
func sameEntry(a, b entry) bool {
	return a.stamp == b.stamp && a.lifted == b.lifted && a.into == b.into &&
		a.ban.Jail == b.ban.Jail && a.ban.Key == b.ban.Key && a.ban.Reason == b.ban.Reason &&
		a.ban.Since.Equal(b.ban.Since) && a.ban.Until.Equal(b.ban.Until) && a.ban.Offences == b.ban.Offences &&
		a.ban.Collateral == b.ban.Collateral
}

// A page is a set of entries by field (jail and key). Pages hold what a
// process knows and what memcached holds; neither is changed in place
// once shared.
type page map[string]entry

// pageOf returns the page of field among n.
func pageOf(f string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(f))
	return int(h.Sum32() % uint32(n))
}

// merge returns the newer entry of each field of a and b, leaving out
// those that ended more than pruneGrace before now.
func merge(a, b page, now time.Time) page {
	out := make(page, max(len(a), len(b)))
	keep := now.Add(-pruneGrace)
	for _, pg := range []page{a, b} {
		for f, e := range pg {
			if !e.ban.Until.After(keep) {
				continue
			}
			if old, ok := out[f]; !ok || compareEntries(e, old) > 0 {
				out[f] = e
			}
		}
	}
	return out
}

// encode returns pg in its stored form, entries sorted by field, so
// that equal pages encode equally.
func (pg page) encode() []byte {
	fields := make([]string, 0, len(pg))
	for f := range pg {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	format := byte(pageFormat1)
	for _, e := range pg {
		if e.ban.Collateral != 0 {
			format = pageFormat2
		}
	}
	out := binary.AppendUvarint([]byte{format}, uint64(len(fields)))
	for _, f := range fields {
		out = appendEntry(out, f, pg[f], format)
	}
	return out
}

// appendEntry appends e, of field f, to dst in the page format format.
func appendEntry(dst []byte, f string, e entry, format byte) []byte {
	dst = appendString(dst, f)
	flags := byte(0)
	if e.lifted {
		flags = 1
	}
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, e.stamp)
	dst = binary.AppendVarint(dst, e.ban.Since.UnixNano())
	dst = binary.AppendVarint(dst, e.ban.Until.UnixNano())
	dst = binary.AppendUvarint(dst, uint64(max(e.ban.Offences, 0)))
	dst = appendString(dst, e.ban.Reason)
	dst = appendString(dst, e.into)
	if format == pageFormat2 {
		dst = binary.AppendUvarint(dst, uint64(max(e.ban.Collateral, 0)))
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decodePage reads a stored page, or reports false if it is not one
// (written by something else, or cut short).
func decodePage(data []byte) (page, bool) {
	if len(data) == 0 || data[0] != pageFormat1 && data[0] != pageFormat2 {
		return nil, false
	}
	d := decoder{b: data[1:], format: data[0]}
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each entry takes bytes: a huge count is a lie
		return nil, false
	}
	pg := make(page, n)
	for range n {
		f, e := d.entry()
		if d.bad {
			return nil, false
		}
		if jail, key, ok := banfield.Parse(f); ok && key != "" {
			e.ban.Jail, e.ban.Key = jail, key
			pg[f] = e
		}
	}
	return pg, !d.bad && len(d.b) == 0
}

// A decoder reads the parts of a page, and remembers whether one was
// malformed.
type decoder struct {
	b      []byte
	format byte
	bad    bool
}

func (d *decoder) entry() (string, entry) {
	var e entry
	f := d.string()
	if len(d.b) == 0 {
		d.bad = true
		return "", e
	}
	e.lifted, d.b = d.b[0]&1 == 1, d.b[1:]
	e.stamp = d.varint()
	e.ban.Since = time.Unix(0, d.varint())
	e.ban.Until = time.Unix(0, d.varint())
	e.ban.Offences = int(min(d.uvarint(), 1<<31))
	e.ban.Reason = d.string()
	e.into = d.string()
	if d.format == pageFormat2 {
		e.ban.Collateral = int64(min(d.uvarint(), 1<<62))
	}
	return f, e
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad, d.b = true, nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
