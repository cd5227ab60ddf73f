package redisbans

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
)

// record is what the hash of bans holds per ban; the jail and key are in
// the field, byte for byte.
type record struct {
	Reason     string `json:"reason"`
	Since      int64  `json:"since"` // Unix ns
	Until      int64  `json:"until"` // Unix ns
	Offences   int    `json:"offences"`
	Collateral int64  `json:"collateral,omitempty"` // unknown to earlier versions, which skip it
}

// encode returns b's record.
func encode(b guard.Ban) string {
	rec, _ := json.Marshal(record{Reason: b.Reason, Since: b.Since.UnixNano(), Until: b.Until.UnixNano(), Offences: b.Offences, Collateral: b.Collateral})
	return string(rec) // a struct of strings and numbers always marshals
}

// decode returns the ban of field f and record v, or false if either was
// written by something else.
func decode(f, v string) (guard.Ban, bool) {
	jail, key, ok := banfield.Parse(f)
	if !ok || key == "" {
		return guard.Ban{}, false
	}
	var rec record
	if err := json.Unmarshal([]byte(v), &rec); err != nil || rec.Until <= rec.Since {
		return guard.Ban{}, false
	}
	return guard.Ban{Jail: jail, Key: key, Reason: rec.Reason, Since: time.Unix(0, rec.Since), Until: time.Unix(0, rec.Until),
		Offences: rec.Offences, Collateral: max(rec.Collateral, 0)}, true
}

// decodeLift returns the lift of field f whose mark v is the lifted
// ban's end in Unix ms, as a Ban of that key until then.
func decodeLift(f, v string) (guard.Ban, bool) {
	jail, key, ok := banfield.Parse(f)
	ms, err := strconv.ParseFloat(v, 64)
	if !ok || key == "" || err != nil {
		return guard.Ban{}, false
	}
	return guard.Ban{Jail: jail, Key: key, Until: time.UnixMilli(int64(ms))}, true
}

// ceilMilli and floorMilli convert times to the sorted set's Unix ms: a
// ban's end rounded up and now rounded down, so that a ban still in force
// by a fraction of a millisecond is never dropped.
func ceilMilli(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / 1e6
	if ns%1e6 > 0 {
		ms++
	}
	return ms
}

func floorMilli(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return ms
}

// A change is one operation of a log entry: a put of ban, or, when
// put is false, a delete of the ban of jail and key in ban.
type change struct {
	put bool
	ban guard.Ban
}

// parseEntry returns the version and changes of a log entry, or false if
// something else wrote it. Changes that do not parse are left out.
func parseEntry(e rueidis.XRangeSlice) (int64, []change, bool) {
	fv := e.FieldValues
	if len(fv) == 0 || fv[0].Field != "v" {
		return 0, nil, false
	}
	v, err := strconv.ParseInt(fv[0].Value, 10, 64)
	if err != nil {
		return 0, nil, false
	}
	var out []change
	for i := 1; i < len(fv); i++ {
		switch fv[i].Field {
		case "d":
			if jail, key, ok := banfield.Parse(fv[i].Value); ok && key != "" {
				out = append(out, change{ban: guard.Ban{Jail: jail, Key: key}})
			}
		case "p":
			if i+1 < len(fv) && fv[i+1].Field == "r" {
				if b, ok := decode(fv[i].Value, fv[i+1].Value); ok {
					out = append(out, change{put: true, ban: b})
				}
				i++
			}
		}
	}
	return v, out, true
}
