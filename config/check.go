package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/suggest"
)

// A shapeChecker holds a YAML tree to the shape of the Go type it is
// decoded into, and reports every mistake of shape at once, each at its
// line and column with its field's path: an unknown field (with the one
// likely meant), a value of the wrong kind (a list for a mapping, words
// for a number or a duration), a field given twice. The YAML library's
// strict decoding stops at the first unknown field and names this
// package's types; the checker reads the same tree the lenient decoding
// fills, and sees what it would drop or fail on.
type shapeChecker struct {
	v *validator
	// errs are the mistakes found; causes the paths of the fields whose
	// values they left empty or zero, so that the errors the semantic
	// checks find there ("rule has no limits") are not told twice.
	errs   []error
	causes []string
	seen   map[checked]bool // against aliases that repeat a subtree
}

type checked struct {
	n *yaml.Node
	t reflect.Type
}

var durationType = reflect.TypeFor[time.Duration]()

// check checks n, at path, against t.
func (c *shapeChecker) check(n *yaml.Node, t reflect.Type, path []any) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if c.seen[checked{n, t}] {
		return
	}
	c.seen[checked{n, t}] = true
	if isNull(n) {
		return // every field may be left empty: the semantic checks say which may not
	}
	switch t.Kind() {
	case reflect.Pointer:
		c.check(n, t.Elem(), path)
	case reflect.Interface:
	case reflect.Struct:
		c.mapping(n, t, path)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			c.fail(n, path, "want a mapping of names to values, not %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			c.check(val, t.Elem(), at(append(path, k.Value)...))
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = fmt.Sprintf(": write [%s] for a list of one", strconv.Quote(n.Value))
			}
			c.fail(n, path, "want a list, not %s%s", describe(n), hint)
			return
		}
		for i, e := range n.Content {
			before := len(c.errs)
			c.check(e, t.Elem(), at(append(path, i)...))
			if len(c.errs) > before && !c.wellShaped(e, t.Elem()) {
				// An element of the wrong kind is left out of the list:
				// the list's own checks ("no rules") follow from it.
				c.causes = append(c.causes, fieldPath(path))
			}
		}
	default:
		c.scalar(n, t, path)
	}
}

// mapping checks n, at path, against the struct type t: every key a
// field of t, given once.
func (c *shapeChecker) mapping(n *yaml.Node, t reflect.Type, path []any) {
	fields := yamlFields(t)
	if n.Kind != yaml.MappingNode {
		c.fail(n, path, "want a mapping with the fields %s, not %s", strings.Join(names(fields), ", "), describe(n))
		return
	}
	first := map[string]*yaml.Node{}
	var dups []int // the second of a key given twice, dropped so that the decoding keeps the first
	defer func() {
		for _, i := range slices.Backward(dups) {
			n.Content = slices.Delete(n.Content, i, i+2)
		}
	}()
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" { // <<: *defaults
			for val.Kind == yaml.AliasNode && val.Alias != nil {
				val = val.Alias
			}
			if val.Kind == yaml.SequenceNode {
				for _, m := range val.Content {
					c.check(m, t, path)
				}
			} else {
				c.check(val, t, path)
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			c.fail(k, path, "a field's name must be a word, not %s", describe(k))
			continue
		}
		f, ok := lookup(fields, k.Value)
		if !ok {
			msg := fmt.Sprintf("unknown field %q", k.Value)
			if s, ok := suggest.Closest(k.Value, names(fields)); ok {
				msg += fmt.Sprintf("; did you mean %q?", s)
				c.causes = append(c.causes, fieldPath(at(append(path, s)...)))
			}
			c.fail(k, path, "%s (%s takes %s)", msg, where(path), strings.Join(names(fields), ", "))
			continue
		}
		if prev, dup := first[k.Value]; dup {
			c.fail(k, at(append(path, k.Value)...), "given twice; the first is at line %d", prev.Line)
			dups = append(dups, i)
			continue
		}
		first[k.Value] = k
		c.check(val, f, at(append(path, k.Value)...))
	}
}

// scalar checks that n, at path, decodes into a value of type t as the
// YAML library decodes it, and says what to write if not.
func (c *shapeChecker) scalar(n *yaml.Node, t reflect.Type, path []any) {
	if n.Kind != yaml.ScalarNode {
		c.fail(n, path, "want a single value (%s), not %s", kindWords(t), describe(n))
		return
	}
	if err := n.Decode(reflect.New(t).Interface()); err == nil {
		return
	}
	switch {
	case t == durationType:
		msg := fmt.Sprintf("%q is not a duration: write a number and a unit (ns, us, ms, s, m, h) without a space, such as 300ms, 10m or 168h", n.Value)
		if d, ok := durationMeant(n.Value); ok {
			msg += fmt.Sprintf("; did you mean %q?", d)
		}
		c.fail(n, path, "%s", msg)
	default:
		c.fail(n, path, "%q is not %s", n.Value, kindWords(t))
	}
}

// wellShaped reports whether n is of the kind t wants (a mapping for a
// struct or a map, a list for a slice, a value for the rest), whatever
// is wrong inside it.
func (c *shapeChecker) wellShaped(n *yaml.Node, t reflect.Type) bool {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return n.Kind == yaml.MappingNode || isNull(n)
	case reflect.Slice:
		return n.Kind == yaml.SequenceNode || isNull(n)
	case reflect.Interface:
		return true
	}
	return n.Kind == yaml.ScalarNode
}

// fail reports a mistake at n, whose value leaves the field at path
// empty.
func (c *shapeChecker) fail(n *yaml.Node, path []any, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.v.name, Line: n.Line, Column: n.Column, Path: fieldPath(path), Err: fmt.Errorf(format, args...)})
	c.causes = append(c.causes, fieldPath(path))
}

// A yamlField is a field of a struct decoded from YAML: its name in the
// file and its type.
type yamlField struct {
	name string
	t    reflect.Type
}

// yamlFields returns the fields of the struct type t that YAML sets, in
// the order of their declaration (the order the documentation lists
// them in).
func yamlFields(t reflect.Type) []yamlField {
	var out []yamlField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, yamlField{name, f.Type})
	}
	return out
}

// lookup returns the type of the field named name.
func lookup(fields []yamlField, name string) (reflect.Type, bool) {
	for _, f := range fields {
		if f.name == name {
			return f.t, true
		}
	}
	return nil, false
}

// names returns the names of fields.
func names(fields []yamlField) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}

// where names the mapping at path for a message: "the top level" or
// its path.
func where(path []any) string {
	if len(path) == 0 {
		return "the top level"
	}
	return fieldPath(path)
}

// describe says what a node holds, for "want X, not Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// kindWords says what values of type t are, in words.
func kindWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if t == durationType {
			return "a duration such as 10m"
		}
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a word or a quoted text"
}

// durationMeant reads what a person likely meant by s, a duration
// written in words ("5 minutes", "2 days", "1.5 hours"), in the form
// time.ParseDuration reads; false if s is no such thing.
func durationMeant(s string) (string, bool) {
	f := strings.Fields(strings.ToLower(s))
	if len(f) == 1 { // "5min", "2d"
		i := strings.IndexFunc(f[0], func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 {
			return "", false
		}
		f = []string{f[0][:i], f[0][i:]}
	}
	if len(f) != 2 {
		return "", false
	}
	n, err := strconv.ParseFloat(f[0], 64)
	if err != nil || n < 0 {
		return "", false
	}
	unit := map[string]time.Duration{
		"ms": time.Millisecond, "msec": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
		"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
		"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
		"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	}[f[1]]
	if unit == 0 {
		return "", false
	}
	d := time.Duration(n * float64(unit))
	if d <= 0 {
		return "", false
	}
	out := d.String() // 5m0s, 48h0m0s, 1h30m0s: drop the zero tails
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out, true
}

// isNull reports whether n is YAML's null: empty, ~ or null.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}
