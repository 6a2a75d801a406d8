package parser

import (
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestErrorString(t *testing.T) {
	e := &Error{Pos: token.Position{Filename: "x.go", Line: 5, Column: 2}, Msg: "missing required period"}
	assert.Equal(t, "x.go:5:2: missing required period", e.Error())

	e = &Error{Pos: token.Position{Line: 5, Column: 2}, Msg: "m"}
	assert.Equal(t, "5:2: m", e.Error())

	e = &Error{Msg: "m"}
	assert.Equal(t, "m", e.Error(), "no position to show")
}

func TestErrorList(t *testing.T) {
	var l ErrorList
	assert.NoError(t, l.Err())
	assert.Equal(t, "no errors", l.Error())

	at := func(file string, line, col int) token.Position {
		return token.Position{Filename: file, Line: line, Column: col}
	}
	l.Add(at("b.go", 1, 1), "b")
	l.Add(at("a.go", 2, 1), "second line")
	l.Add(at("a.go", 1, 9), "later column")
	l.Add(at("a.go", 1, 3), "z %d", 2)
	l.Add(at("a.go", 1, 3), "a %s", "1")
	assert.Len(t, l, 5)

	err := l.Err()
	want := "a.go:1:3: a 1\n" +
		"a.go:1:3: z 2\n" +
		"a.go:1:9: later column\n" +
		"a.go:2:1: second line\n" +
		"b.go:1:1: b"
	assert.EqualError(t, err, want)
	assert.Equal(t, "b", l[0].Msg, "Err sorts a copy")

	l.Sort()
	assert.Equal(t, want, l.Error())
}
