package httplimit_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/testing/storefault"
	"github.com/sluicehq/sluice/store/memory"
)

// newStore returns a memory store that fails on demand (SetFail), closed
// when the test ends.
func newStore(t *testing.T) *storefault.Store { return storefault.New(t) }

// newExampleStore is the store of the examples, which have no *testing.T
// and end with the process.
func newExampleStore() *memory.Store { return memory.New(memory.Config{}) }
