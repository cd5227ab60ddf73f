package simulate

import (
	"hash/maphash"
	"text/tabwriter"
)

// A Comparison is how two rule sets differ on the same requests, rule
// by rule (rules matched by name): the requests and keys that one set
// would deny and the other would not.
type Comparison struct {
	// A and B name the rule sets: the configuration and -compare's.
	A     string     `json:"a"`
	B     string     `json:"b"`
	Rules []RuleDiff `json:"rules"`
	// B's own report.
	Report *Report `json:"report_b"`
}

// A RuleDiff is how one rule's decisions differ between the sets.
type RuleDiff struct {
	Rule string `json:"rule"`
	// In says where the rule is: "both", "a" or "b" (then nothing is
	// compared).
	In string `json:"in"`
	// Requests is how many requests both sets asked the rule about;
	// OnlyA those A denies and B does not, OnlyB the reverse.
	Requests int64 `json:"requests"`
	OnlyA    int64 `json:"only_a"`
	OnlyB    int64 `json:"only_b"`
	// KeysOnlyA and KeysOnlyB estimate the distinct keys of those
	// requests; TopOnlyA and TopOnlyB list the most of them.
	KeysOnlyA int64      `json:"keys_only_a"`
	KeysOnlyB int64      `json:"keys_only_b"`
	TopOnlyA  []KeyCount `json:"top_only_a"`
	TopOnlyB  []KeyCount `json:"top_only_b"`
}

// A differ compares the decisions of two Replayers entry by entry.
type differ struct {
	pairs []diffPair
	rules []RuleDiff
	top   int
}

type diffPair struct {
	a, b         *ruleStats
	d            *RuleDiff
	keysA, keysB *distinct
	topA, topB   *topKeys
}

func newDiffer(a, b *Replayer, top, sketch int) *differ {
	df := &differ{top: top}
	inB := map[string]*ruleStats{}
	for _, rs := range b.routes {
		inB[rs.route.Rule] = rs
	}
	seed := maphash.MakeSeed()
	for _, rs := range a.routes {
		d := RuleDiff{Rule: rs.route.Rule, In: "a"}
		if rb := inB[rs.route.Rule]; rb != nil {
			d.In = "both"
			delete(inB, rs.route.Rule)
			df.pairs = append(df.pairs, diffPair{a: rs, b: rb, keysA: newDistinct(seed), keysB: newDistinct(seed), topA: newTopKeys(sketch/4, 0, seed), topB: newTopKeys(sketch/4, 0, seed)})
		}
		df.rules = append(df.rules, d)
	}
	for _, rs := range b.routes {
		if inB[rs.route.Rule] != nil {
			df.rules = append(df.rules, RuleDiff{Rule: rs.route.Rule, In: "b"})
		}
	}
	return df
}

// add compares the decisions of the entry both replayers just decided.
func (df *differ) add() {
	for i := range df.pairs {
		p := &df.pairs[i]
		if !p.a.asked || !p.b.asked {
			continue
		}
		if p.d == nil {
			p.d = df.rule(p.a.route.Rule)
		}
		p.d.Requests++
		switch {
		case p.a.wasDenied && !p.b.wasDenied:
			p.d.OnlyA++
			p.keysA.add(p.a.key)
			p.topA.add(p.a.key)
		case p.b.wasDenied && !p.a.wasDenied:
			p.d.OnlyB++
			p.keysB.add(p.b.key)
			p.topB.add(p.b.key)
		}
	}
}

func (df *differ) rule(name string) *RuleDiff {
	for i := range df.rules {
		if df.rules[i].Rule == name {
			return &df.rules[i]
		}
	}
	return nil
}

// result returns the rules' differences.
func (df *differ) result() []RuleDiff {
	byCount := func(c *counter) int64 { return c.count }
	for i := range df.pairs {
		p := &df.pairs[i]
		d := df.rule(p.a.route.Rule)
		d.KeysOnlyA, d.KeysOnlyB = p.keysA.count(), p.keysB.count()
		d.TopOnlyA, d.TopOnlyB = keyCounts(p.topA.top(df.top, byCount)), keyCounts(p.topB.top(df.top, byCount))
	}
	return df.rules
}

func keyCounts(cs []counter) []KeyCount {
	out := []KeyCount{}
	for _, c := range cs {
		out = append(out, KeyCount{Key: c.key, Denied: c.count, Err: c.err})
	}
	return out
}

// writeText writes the comparison as a diff: "-" denied by A only, "+"
// by B only.
func (c *Comparison) writeText(p *printer) {
	p.printf("\ncompare: - denied by %s only, + denied by %s only\n", c.A, c.B)
	for _, d := range c.Rules {
		switch d.In {
		case "a":
			p.printf("\n- rule %s: only in %s\n", d.Rule, c.A)
			continue
		case "b":
			p.printf("\n+ rule %s: only in %s\n", d.Rule, c.B)
			continue
		}
		p.printf("\nrule %s: %d requests; -%d requests of %d keys, +%d requests of %d keys\n", d.Rule, d.Requests, d.OnlyA, d.KeysOnlyA, d.OnlyB, d.KeysOnlyB)
		tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
		for _, k := range d.TopOnlyA {
			_, _ = tw.Write([]byte("- " + k.Key + "\t" + itoa(k.Denied) + "\t\n"))
		}
		for _, k := range d.TopOnlyB {
			_, _ = tw.Write([]byte("+ " + k.Key + "\t" + itoa(k.Denied) + "\t\n"))
		}
		_ = tw.Flush()
	}
}
