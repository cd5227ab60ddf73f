package memcachedbans

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mk(key string, stamp int64, lifted bool, until time.Duration) entry {
	return entry{ban: guard.Ban{Jail: "j", Key: key, Reason: "r", Since: t0, Until: t0.Add(until), Offences: 1}, lifted: lifted, stamp: stamp}
}

// TestMerge: the newer entry of each jail and key wins, whichever page
// holds it; a lift wins a tie; lapsed entries go once their grace is
// over; merging is symmetric.
func TestMerge(t *testing.T) {
	for _, tt := range []struct {
		name string
		a, b entry
		want entry
	}{
		{"later ban", mk("k", 1, false, time.Hour), mk("k", 2, false, time.Minute), mk("k", 2, false, time.Minute)},
		{"later lift", mk("k", 1, false, time.Hour), mk("k", 2, true, time.Hour), mk("k", 2, true, time.Hour)},
		{"ban after a lift", mk("k", 3, false, time.Hour), mk("k", 2, true, time.Hour), mk("k", 3, false, time.Hour)},
		{"tie: the lift", mk("k", 2, false, time.Hour), mk("k", 2, true, time.Hour), mk("k", 2, true, time.Hour)},
		{"tie: the longer", mk("k", 2, false, time.Hour), mk("k", 2, false, 2*time.Hour), mk("k", 2, false, 2*time.Hour)},
	} {
		f := banfield.Name("j", "k")
		for _, order := range [][2]entry{{tt.a, tt.b}, {tt.b, tt.a}} {
			got := merge(page{f: order[0]}, page{f: order[1]}, t0)
			if len(got) != 1 || !sameEntry(got[f], tt.want) {
				t.Errorf("%s: merge = %+v, want %+v", tt.name, got, tt.want)
			}
		}
	}
	old := page{banfield.Name("j", "old"): mk("old", 1, false, time.Minute), banfield.Name("j", "new"): mk("new", 1, true, time.Hour)}
	if got := merge(old, nil, t0.Add(time.Minute+pruneGrace/2)); len(got) != 2 {
		t.Errorf("within the grace, merge kept %d entries, want 2", len(got))
	}
	if got := merge(old, nil, t0.Add(time.Minute+pruneGrace)); len(got) != 1 {
		t.Errorf("after the grace, merge kept %d entries, want 1", len(got))
	}
}

// TestPageCodec: a page comes back exactly, whatever bytes its jails,
// keys and reasons hold, and encodes the same whatever its map's order;
// in the first format, which earlier versions read, unless a ban tells
// its collateral.
func TestPageCodec(t *testing.T) {
	for _, collateral := range []int64{0, 65_531} {
		pg := page{}
		for i, key := range []string{"203.0.113.7", "2001:db8::/48", "\xff\x00\r\n", "k:with:colons", string(make([]byte, 300))} {
			e := mk(key, int64(i), i%2 == 1, time.Duration(i+1)*time.Hour)
			e.ban.Reason = "reason \xfe " + key
			e.into = "198.51.100.0/24"
			if i == 1 {
				e.ban.Collateral = collateral
			}
			pg[banfield.Name("j", key)] = e
		}
		data := pg.encode()
		if want := map[bool]byte{false: pageFormat1, true: pageFormat2}[collateral != 0]; data[0] != want {
			t.Errorf("collateral %d: format %d, want %d", collateral, data[0], want)
		}
		got, ok := decodePage(data)
		if !ok || len(got) != len(pg) {
			t.Fatalf("decodePage = %d entries, %v; want %d", len(got), ok, len(pg))
		}
		for f, e := range pg {
			if !sameEntry(got[f], e) {
				t.Errorf("entry %q = %+v, want %+v", f, got[f], e)
			}
		}
		if string(got.encode()) != string(data) {
			t.Error("a decoded page encodes differently")
		}
		for _, bad := range [][]byte{nil, {}, {2}, {3, 0}, data[:len(data)-1], append(data, 0), {pageFormat1, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
			if _, ok := decodePage(bad); ok {
				t.Errorf("decodePage(%q) accepted", bad)
			}
		}
	}
}

// FuzzDecodePage decodes arbitrary bytes: no panic, and what decodes
// encodes to what decodes the same.
func FuzzDecodePage(f *testing.F) {
	f.Add(page{banfield.Name("j", "k"): mk("k", 1, false, time.Hour)}.encode())
	f.Add([]byte{pageFormat1, 0})
	f.Add([]byte{pageFormat2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		pg, ok := decodePage(data)
		if !ok {
			return
		}
		again, ok := decodePage(pg.encode())
		if !ok || len(again) != len(pg) {
			t.Fatalf("re-decoding: %d entries, %v; want %d", len(again), ok, len(pg))
		}
	})
}
