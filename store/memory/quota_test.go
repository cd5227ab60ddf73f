package memory

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestQuotaConformance(t *testing.T) {
	storetest.RunQuotas(t, func(t *testing.T) sluice.QuotaStore {
		s := New(Config{SweepInterval: -1})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestQuotaCap: at the tables' share of MaxBytes a new holder is refused,
// Full, and the holders keep their shares; when their shares expire, the
// room is reclaimed.
func TestQuotaCap(t *testing.T) {
	s := New(Config{SweepInterval: -1, MaxBytes: 64 << 10})
	defer s.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	req := func(key string, at time.Duration) sluice.ShareRequest {
		return sluice.ShareRequest{Prefix: "p:", Key: key, Holder: "edge-1", Limit: sluice.PerSecond(100),
			Demand: sluice.UnknownDemand, TTL: time.Second, Now: t0.Add(at)}
	}
	held := 0
	for i := range 1000 {
		sh, err := s.Share(t.Context(), req(string(rune('a'+i%26))+string(rune('a'+i/26)), 0))
		if err != nil {
			t.Fatal(err)
		}
		if sh.Full {
			break
		}
		held++
	}
	if held == 0 || held == 1000 || s.QuotaBytes() > 64<<10/quotaShare {
		t.Fatalf("held %d tables in %d bytes: want a bound below 1000 tables, within %d bytes", held, s.QuotaBytes(), 64<<10/quotaShare)
	}
	if sh, _ := s.Share(t.Context(), req("aa", 500*time.Millisecond)); sh.Full || sh.Rate != 100 {
		t.Errorf("a holder of a full store asking again = %+v, want its share", sh)
	}
	sh, err := s.Share(t.Context(), req("new", 2*time.Second))
	if err != nil || sh.Full || sh.Rate != 100 {
		t.Errorf("a newcomer once the shares expired = %+v, %v; want a share", sh, err)
	}
	if s.QuotaBytes() > 1024 {
		t.Errorf("after the sweep the tables count %d bytes, want one table's", s.QuotaBytes())
	}
}
