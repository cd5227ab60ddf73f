package leasetest

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestForgeries: the forgeries of an ID never hold it, and hold its
// neighbours and IDs of every length around the valid ones, the same on
// every call.
func TestForgeries(t *testing.T) {
	const id = "mD5FFg8PY0lcU5fH2"
	f := Forgeries(id)
	for _, want := range []string{"mD5FFg8PY0lcU5fH3", "mD5FFg8PY0lcU5fH1", "nD5FFg8PY0lcU5fH2", "", "mD5FFg8PY0lcU5fH"} {
		if !slices.Contains(f, want) {
			t.Errorf("Forgeries(%q) lacks %q", id, want)
		}
	}
	lens := map[int]bool{}
	for _, s := range f {
		if s == id {
			t.Fatalf("Forgeries(%q) holds the ID itself", id)
		}
		lens[len(s)] = true
	}
	for n := range sluice.MaxLeaseIDLen + 2 {
		if !lens[n] {
			t.Errorf("Forgeries(%q) has no ID of %d bytes", id, n)
		}
	}
	if !slices.Equal(f, Forgeries(id)) {
		t.Error("Forgeries differ from call to call")
	}
}
