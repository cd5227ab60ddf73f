// Package suggest finds the word a person most likely meant, for the
// "did you mean" of error messages: a misspelt command, flag, field or
// option.
package suggest

import "strings"

// Closest returns the option nearest to word, and true if it is near
// enough to be a likely misspelling: at most a third of the longer
// word's letters apart (insertions, deletions, substitutions and swaps
// of neighbours, ignoring case), or word is a prefix of it, or it of
// word. Ties go to the earlier option. It never suggests word itself.
func Closest(word string, options []string) (string, bool) {
	w := strings.ToLower(word)
	best, bestDist := "", -1
	for _, o := range options {
		lo := strings.ToLower(o)
		if lo == w || o == "" {
			continue
		}
		d := distance(w, lo)
		if len(w) >= 3 && (strings.HasPrefix(lo, w) || strings.HasPrefix(w, lo)) {
			d = min(d, 1)
		}
		if d > max(len(w), len(lo))/3 {
			continue
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = o, d
		}
	}
	return best, bestDist >= 0
}

// DidYouMean returns `; did you mean "X"?` for the option Closest finds,
// or "" when none is close.
func DidYouMean(word string, options []string) string {
	if s, ok := Closest(word, options); ok {
		return `; did you mean "` + s + `"?`
	}
	return ""
}

// distance is the optimal string alignment distance of a and b, in
// bytes: insertions, deletions, substitutions and transpositions of
// adjacent bytes each cost one.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 { // no misspelling is that long
		return max(len(a), len(b))
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
