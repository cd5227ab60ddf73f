package algorithm

import (
	"encoding/binary"
	"errors"
	"slices"
)

// UnknownDemand is the demand of a holder whose use is not measured yet
// (its first report): it is counted as wanting the whole limit, so that
// a newcomer gets a fair part of what is free at once, and its true
// demand at its next report.
const UnknownDemand = -1

// KeepDemand, as the demand of a call of Share, keeps the demand the
// table holds for the holder (UnknownDemand for a newcomer): for an edge
// that reconnects, whose demand is not measured on its new stream yet
// but was on its old one, so that it keeps its share.
const KeepDemand = -2

// A QuotaTable is the state of one key of an edge quota: the holders
// that share the key's limit (Envoy instances, Go programs), each with
// its demand, the share of the limit it was granted and when that share
// expires. A share is counted while now < its expiry, so a holder that
// stops asking gives its share back when the share expires.
//
// Share divides the limit max-min fairly by demand: every holder gets
// its demand if it fits, and the rest an equal part of what is left
// (the water level), all in whole units. The table keeps one invariant,
// whatever the order of the calls: the shares it counts sum to at most
// the limit (for a limit that never shrinks; after a smaller limit, the
// sum falls within it as the holders ask again or expire). A holder's
// share grows only into what the others leave free, and shrinks at once.
//
// A reserve of the limit may be kept for holders that hold nothing yet
// (newcomers): the water level then divides limit − reserve, a holder
// with a share grows only into what the others leave free beyond the
// reserve (but keeps what it holds up to its fair share, and may take
// of the reserve what the others keep beyond theirs by Hysteresis), and a holder
// without one may take, beside what is free beyond the reserve, half of
// what is free (rounded up). A newcomer thus gets a share at once even
// while the others hold all they may, the next one half of what is
// left, and so on, while the sum stays within the limit; the others
// shrink to the new level as they ask again, which restores the reserve.
//
// The methods take the time and read no clock. store/memory applies
// exactly these semantics; the Redis script quota.lua is their twin,
// held to them by store/storetest.RunQuotas.
//
// The zero value is an empty table. A QuotaTable is not safe for
// concurrent use: the store serialises the calls on one key.
type QuotaTable struct {
	Holders []QuotaHolder
}

// A QuotaHolder is one entry of a QuotaTable.
type QuotaHolder struct {
	ID string
	// Demand is what the holder wants, in units of the limit's rate:
	// at least 0, or UnknownDemand.
	Demand int64
	// Share is what it was granted, in the same units.
	Share int64
	// Exp is when the share expires, Unix ns: counted while now < Exp.
	Exp int64
}

// Hysteresis is the change of a holder's fair share, as a fraction
// 1/Hysteresis of its share, below which Share keeps the share it has:
// an edge such as Envoy starts a new, full token bucket whenever its
// strategy changes, so shares that moved by a few units at every report
// would each hand out a fresh burst.
const Hysteresis = 40

// Prune drops the holders whose shares have expired at now and returns
// how many it dropped.
func (t *QuotaTable) Prune(now int64) int {
	n := len(t.Holders)
	t.Holders = slices.DeleteFunc(t.Holders, func(h QuotaHolder) bool { return h.Exp <= now })
	return n - len(t.Holders)
}

// Share records that holder id wants demand units (UnknownDemand: not
// measured yet; KeepDemand: what the table holds for it) of limit until
// exp, keeping reserve units for newcomers (see QuotaTable; 0: none,
// else less than limit), and returns its new share: its fair share
// within the holders' demands, kept as it was while the fair share moves
// by less than 1/Hysteresis of it, and never more than the limit minus
// what the others hold. A new holder in a table of maxHolders already
// is refused: ok is false, and it holds nothing.
func (t *QuotaTable) Share(id string, demand, limit, reserve, now, exp int64, maxHolders int) (share int64, ok bool) {
	t.Prune(now)
	i := t.find(id)
	if i < 0 {
		if len(t.Holders) >= maxHolders {
			return 0, false
		}
		t.Holders = append(t.Holders, QuotaHolder{ID: id, Demand: UnknownDemand})
		i = len(t.Holders) - 1
	}
	h := &t.Holders[i]
	if demand == KeepDemand {
		demand = h.Demand
	}
	h.Demand, h.Exp = demand, exp
	reserve = min(max(reserve, 0), limit-1)
	level := t.level(limit, limit-reserve)
	fair := min(clampDemand(demand, limit), level)
	old := h.Share
	share = fair
	if old > 0 && abs(fair-old)*Hysteresis <= old {
		share = old
	}
	free := limit - (t.Granted() - old)
	h.Share = max(min(share, room(free, max(reserve-t.slack(i, limit, level), 0), old, fair)), 0)
	return h.Share, true
}

// slack returns what the holders other than the i-th hold beyond their
// fair shares at level, each by less than the Hysteresis that keeps its
// share: units no report of theirs gives back (a share further beyond
// is cut at its holder's next report). Share lets a holder take that
// much of the reserve: without it, shares the others keep a unit or two
// above the level held an edge below its own fair share, its users
// refused, for as long as the demands stood.
func (t *QuotaTable) slack(i int, limit, level int64) int64 {
	var s int64
	for j, h := range t.Holders {
		over := h.Share - min(clampDemand(h.Demand, limit), level)
		if j != i && over > 0 && over*Hysteresis <= h.Share {
			s += over
		}
	}
	return s
}

// room returns the most a holder may hold when free units are not held
// by the others: what is free beyond the reserve; for a holder that
// holds nothing (old 0), at least half of what is free, rounded up; for
// one that holds a share, at least that share up to its fair one.
func room(free, reserve, old, fair int64) int64 {
	r := free - reserve
	if old == 0 {
		r = max(r, (free+1)/2)
	} else {
		r = max(r, min(old, fair))
	}
	return min(r, free)
}

// Release gives holder id's share back, and reports whether it held one
// at now.
func (t *QuotaTable) Release(id string, now int64) bool {
	t.Prune(now)
	i := t.find(id)
	if i < 0 {
		return false
	}
	t.Holders = slices.Delete(t.Holders, i, i+1)
	return true
}

// Level returns the water level of the holders' demands in limit: the
// share of a holder that wants more than the others leave it. It is
// limit when every demand fits.
func (t *QuotaTable) Level(limit int64) int64 { return t.level(limit, limit) }

// level returns the water level of the holders' demands, each clamped
// to limit, in what units.
func (t *QuotaTable) level(limit, units int64) int64 {
	ds := make([]int64, len(t.Holders))
	for i, h := range t.Holders {
		ds[i] = clampDemand(h.Demand, limit)
	}
	slices.Sort(ds)
	left := units
	for k, d := range ds {
		fair := left / int64(len(ds)-k)
		if d > fair {
			return fair
		}
		left -= d
	}
	return units
}

// Granted returns the sum of the holders' shares.
func (t *QuotaTable) Granted() int64 {
	var s int64
	for _, h := range t.Holders {
		s += h.Share
	}
	return s
}

// Demand returns the sum of the holders' demands in limit (an unknown
// one counts as the limit).
func (t *QuotaTable) Demand(limit int64) int64 {
	var s int64
	for _, h := range t.Holders {
		s += clampDemand(h.Demand, limit)
	}
	return s
}

// Latest returns the latest expiry of the table's shares, or 0 for an
// empty table: when the whole table can be forgotten.
func (t *QuotaTable) Latest() int64 {
	var e int64
	for _, h := range t.Holders {
		e = max(e, h.Exp)
	}
	return e
}

// Holds reports whether the table holds holder id (live or not).
func (t *QuotaTable) Holds(id string) bool { return t.find(id) >= 0 }

func (t *QuotaTable) find(id string) int {
	return slices.IndexFunc(t.Holders, func(h QuotaHolder) bool { return h.ID == id })
}

// clampDemand returns demand within [0, limit], an unknown one as limit.
func clampDemand(demand, limit int64) int64 {
	if demand < 0 || demand > limit {
		return limit
	}
	return demand
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// quotaTableVersion starts every encoded QuotaTable.
const quotaTableVersion = 1

// ErrCorruptQuota is the error of DecodeQuotaTable for bytes that are
// not an encoded QuotaTable.
var ErrCorruptQuota = errors.New("corrupt quota table")

// AppendBinary appends the encoding of t to b: a version byte, then per
// holder its demand, share and expiry (8 bytes each, little-endian), its
// ID's length (1 byte) and its ID.
func (t *QuotaTable) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, quotaTableVersion)
	for _, h := range t.Holders {
		if len(h.ID) == 0 || len(h.ID) > 255 {
			return nil, ErrCorruptQuota
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(h.Demand))
		b = binary.LittleEndian.AppendUint64(b, uint64(h.Share))
		b = binary.LittleEndian.AppendUint64(b, uint64(h.Exp))
		b = append(b, byte(len(h.ID)))
		b = append(b, h.ID...)
	}
	return b, nil
}

// DecodeQuotaTable decodes what AppendBinary encoded, holding at most
// max holders: a longer or malformed table is ErrCorruptQuota, never a
// panic or an allocation larger than b.
func DecodeQuotaTable(b []byte, max int) (QuotaTable, error) {
	var t QuotaTable
	if len(b) == 0 || b[0] != quotaTableVersion {
		return t, ErrCorruptQuota
	}
	const fixed = 25
	for b = b[1:]; len(b) > 0; {
		if len(b) < fixed || len(t.Holders) == max {
			return QuotaTable{}, ErrCorruptQuota
		}
		h := QuotaHolder{
			Demand: int64(binary.LittleEndian.Uint64(b)),
			Share:  int64(binary.LittleEndian.Uint64(b[8:])),
			Exp:    int64(binary.LittleEndian.Uint64(b[16:])),
		}
		n := int(b[24])
		if h.Demand < UnknownDemand || h.Share < 0 || h.Exp <= 0 || n == 0 || len(b) < fixed+n {
			return QuotaTable{}, ErrCorruptQuota
		}
		h.ID = string(b[fixed : fixed+n])
		t.Holders = append(t.Holders, h)
		b = b[fixed+n:]
	}
	return t, nil
}
