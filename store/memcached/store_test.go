package memcached

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/storetest"
)

// newStore returns a Store over the given servers, closed by t.Cleanup.
func newStore(t testing.TB, c Config) *Store {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := testserver.StartMemcached(t)
	storetest.Run(t, func(t *testing.T) sluice.Store {
		return newStore(t, Config{Addrs: []string{srv.Addr}})
	})
}
