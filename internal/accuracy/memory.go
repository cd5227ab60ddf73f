package accuracy

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// Memory returns the NewStore of memory stores configured by c. Without
// the background sweeper (SweepInterval -1), whose real-time ticks would
// make a measurement depend on how long it took, a memory store that is
// under its cap must decide exactly as Direct does.
func Memory(c memory.Config) NewStore {
	return func() (sluice.Store, func(), error) {
		s := memory.New(c)
		return s, func() { s.Close() }, nil
	}
}
