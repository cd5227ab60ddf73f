package banfield

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, tt := range []struct{ jail, key string }{
		{"", ""}, {"abuse", "203.0.113.9"}, {"a:b", "1:c"}, {"12", "3:\x00\xff"},
	} {
		j, k, ok := Parse(Name(tt.jail, tt.key))
		if !ok || j != tt.jail || k != tt.key {
			t.Errorf("Parse(Name(%q, %q)) = %q, %q, %v", tt.jail, tt.key, j, k, ok)
		}
	}
	for _, f := range []string{"", "abuse", "x:abuse", "-1:a", "9:short"} {
		if _, _, ok := Parse(f); ok {
			t.Errorf("Parse(%q) ok, want not a field", f)
		}
	}
}

// FuzzParse checks that any string either is refused or splits into a
// jail and key that name the same ban again.
func FuzzParse(f *testing.F) {
	f.Add("5:abuse203.0.113.9")
	f.Fuzz(func(t *testing.T, s string) {
		j, k, ok := Parse(s)
		if !ok {
			return
		}
		if j2, k2, ok := Parse(Name(j, k)); !ok || j2 != j || k2 != k {
			t.Errorf("Parse(%q) = %q, %q, which Name and Parse turn into %q, %q", s, j, k, j2, k2)
		}
	})
}
