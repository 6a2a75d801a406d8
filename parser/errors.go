package parser

import (
	"cmp"
	"fmt"
	"go/token"
	"slices"
	"strings"
)

// Error is one diagnostic about a directive, positioned at the offending
// token.
type Error struct {
	// Pos is the absolute position in the file of the offending token.
	Pos token.Position
	// Msg describes the problem: lower case, no trailing period.
	Msg string
	// Notes point at other places the problem involves, such as the first
	// of two duplicates.
	Notes []Note
}

// Note is another place an Error involves.
type Note struct {
	Pos token.Position
	Msg string
}

// Error returns "file:line:col: msg", like the Go compiler, followed by
// each note on a line of its own, indented by a tab, as the compiler
// prints "other declaration of x". A position with neither a file name
// nor a line is left out.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(withPos(e.Pos, e.Msg))
	for _, n := range e.Notes {
		b.WriteString("\n\t" + withPos(n.Pos, n.Msg))
	}
	return b.String()
}

func withPos(pos token.Position, msg string) string {
	if pos.Filename != "" || pos.IsValid() {
		return pos.String() + ": " + msg
	}
	return msg
}

// AddNote adds a note at pos whose message is fmt.Sprintf(format, args...).
func (e *Error) AddNote(pos token.Position, format string, args ...any) {
	e.Notes = append(e.Notes, Note{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// ErrorList collects diagnostics. The zero value is an empty list ready to
// use.
type ErrorList []*Error

// Add appends a diagnostic at pos whose message is fmt.Sprintf(format,
// args...) and returns it, for notes.
func (l *ErrorList) Add(pos token.Position, format string, args ...any) *Error {
	e := &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
	*l = append(*l, e)
	return e
}

// Sort sorts the list in place by file name, line, column, then message.
func (l ErrorList) Sort() {
	slices.SortStableFunc(l, compareErrors)
}

func compareErrors(a, b *Error) int {
	return cmp.Or(
		cmp.Compare(a.Pos.Filename, b.Pos.Filename),
		cmp.Compare(a.Pos.Line, b.Pos.Line),
		cmp.Compare(a.Pos.Column, b.Pos.Column),
		cmp.Compare(a.Msg, b.Msg),
	)
}

// Error returns the diagnostics one per line, in list order, without a
// trailing newline.
func (l ErrorList) Error() string {
	if len(l) == 0 {
		return "no errors"
	}
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns nil when the list is empty, and otherwise a sorted copy of
// the list as an error. The receiver is not modified.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	sorted := slices.Clone(l)
	sorted.Sort()
	return sorted
}
