package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
)

// An Error is one mistake in a configuration file: where it is, which
// field, and what is wrong, in words that say what to write instead.
// It reads as a compiler's error does:
//
//	sluice.yaml:7:15: rules[1].limits[0]: limit "10/fortnight": period "fortnight" is not ...
type Error struct {
	// File is the file's name as given to Load or Parse.
	File string
	// Line and Column place the mistake in the file, from 1; 0 when it
	// has no one place (a file that cannot be read, an empty one), and
	// Column 0 when the YAML parser gives only a line.
	Line, Column int
	// Path is the field at fault, such as rules[1].limits[0]; empty for
	// the file as a whole.
	Path string
	// Err says what is wrong.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns what is wrong, for errors.Is.
func (e *Error) Unwrap() error { return e.Err }

// Errors are every mistake Load, Parse and Validate found in a
// configuration, each an *Error, in the order of their files and
// places: a file with three mistakes takes one run to fix. Its text is
// one line per mistake.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the mistakes, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// errorsOf flattens err, a tree of joined errors of one file, into
// Errors in the order of their places in it; a leaf that is no *Error
// is a mistake of file as a whole.
func errorsOf(file string, err error) Errors {
	if err == nil {
		return nil
	}
	var out Errors
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *Error:
			out = append(out, e)
		case Errors:
			out = append(out, e...)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		default:
			out = append(out, &Error{File: file, Err: err})
		}
	}
	walk(err)
	sortErrors(out)
	return slices.CompactFunc(out, func(a, b *Error) bool { return a.Error() == b.Error() })
}

// plain is err's text without the prefixes of package sluice's sentinel
// errors ("sluice: invalid limit: "), which a person reading about a
// field of a file has no use for; it still wraps err.
func plain(err error) error {
	msg := err.Error()
	for _, s := range []error{sluice.ErrInvalidLimit, sluice.ErrInvalidRequest} {
		msg = strings.ReplaceAll(msg, s.Error()+": ", "")
	}
	return plainError{msg, err}
}

type plainError struct {
	msg string
	err error
}

func (e plainError) Error() string { return e.msg }
func (e plainError) Unwrap() error { return e.err }

// explained reports whether the semantic error e follows from a
// mistake the structural check reported: a misspelt field (which left
// the field it meant empty) or a value of the wrong type (left zero),
// at the paths in causes.
func explained(e *Error, causes []string) bool {
	for _, c := range causes {
		if c == "" || e.Path == c || strings.HasPrefix(e.Path, c+".") || strings.HasPrefix(e.Path, c+"[") {
			return true
		}
	}
	return false
}

var errEmpty = errors.New("empty configuration: want a mapping with rules (sluice config sample prints one)")
