package suggest

import "testing"

func TestClosest(t *testing.T) {
	for _, tt := range []struct {
		word    string
		options []string
		want    string
		ok      bool
	}{
		{"limts", []string{"name", "limits", "shadow"}, "limits", true},
		{"serv", []string{"serve", "check", "bans"}, "serve", true},
		{"slidng", []string{"gcra", "fixed", "sliding", "approx", "log"}, "sliding", true},
		{"fxied", []string{"gcra", "fixed", "sliding"}, "fixed", true},
		{"Limits", []string{"limits"}, "", false}, // itself, in other case: not a misspelling
		{"leaky", []string{"gcra", "fixed", "sliding", "approx", "log"}, "", false},
		{"memroy", []string{"memory", "redis", "memcached"}, "memory", true},
		{"lisen", []string{"listen", "admin-listen", "grpc-listen"}, "listen", true},
		{"x", []string{"a", "b"}, "", false},
		{"ban", []string{"bans", "bench"}, "bans", true},
		{"", []string{"a"}, "", false},
	} {
		got, ok := Closest(tt.word, tt.options)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Closest(%q, %q) = %q, %v; want %q, %v", tt.word, tt.options, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "abc", 0},
		{"abc", "acb", 1},
		{"kitten", "sitting", 3},
		{"limts", "limits", 1},
		{"", "abc", 3},
	} {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	if got, want := DidYouMean("limts", []string{"limits"}), `; did you mean "limits"?`; got != want {
		t.Errorf("DidYouMean = %q, want %q", got, want)
	}
	if got := DidYouMean("zzz", []string{"limits"}); got != "" {
		t.Errorf("DidYouMean(zzz) = %q, want none", got)
	}
}
