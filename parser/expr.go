package parser

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Expr is the value of a key= or a cost= that is not a number: a Go
// expression of a small subset, an operand followed by selectors. The
// operand is an identifier, a call of one (principal(ctx), len(req.Skus)),
// or a package's identifier selecting one of its functions
// (auth.Principal(ctx)); each selector after it names a field (req.User),
// or a method called without arguments (req.GetTenant()), and a call's
// arguments are such expressions too. Whether an identifier is a parameter,
// a function or a package, the generator decides with the types.
type Expr struct {
	// Parts are the identifiers, in order: the operand, then each
	// selector.
	Parts []Part
}

// Part is one identifier of an expression and the call that follows it,
// if any.
type Part struct {
	// Name is the identifier.
	Name string
	// Offset is the byte offset of Name in the value, quotes removed.
	Offset int
	// Call says Name is followed by parentheses, holding Args.
	Call bool
	Args []*Expr
}

// String writes e as a directive does, without spaces: req.User.ID,
// req.GetTenant(), auth.Principal(ctx,req), len(req.Skus).
func (e *Expr) String() string {
	var b strings.Builder
	e.write(&b)
	return b.String()
}

func (e *Expr) write(b *strings.Builder) {
	for i, p := range e.Parts {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.Name)
		if !p.Call {
			continue
		}
		b.WriteByte('(')
		for j, a := range p.Args {
			if j > 0 {
				b.WriteByte(',')
			}
			a.write(b)
		}
		b.WriteByte(')')
	}
}

// Offset returns the byte offset of e in the value, quotes removed.
func (e *Expr) Offset() int {
	return e.Parts[0].Offset
}

// Accepted says what a key= or cost= may be, for messages.
const Accepted = "want a parameter (id), a path of fields and methods (req.User.ID, req.GetTenant()), " +
	"a function call (principal(ctx), auth.Principal(ctx)) or len(x)"

var errWantExpr = errors.New(Accepted)

// maxNesting bounds how deeply calls may nest in their arguments.
const maxNesting = 8

// parseExpr parses an expression. Spaces may separate its tokens (quote the
// value then).
func parseExpr(s string) (*Expr, error) {
	p := &exprParser{s: s}
	e, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(s) {
		return nil, p.unexpected()
	}
	return e, nil
}

// exprParser reads an expression from s, at s[i].
type exprParser struct {
	s string
	i int
}

func (p *exprParser) space() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

func (p *exprParser) at(c byte) bool {
	return p.i < len(p.s) && p.s[p.i] == c
}

// unexpected describes what stands at s[i] where it cannot.
func (p *exprParser) unexpected() error {
	switch {
	case p.i >= len(p.s):
		return errWantExpr
	case p.at(')'):
		return fmt.Errorf(`unexpected ")": %s`, Accepted)
	}
	return fmt.Errorf("unexpected %s: %s", quote(p.s[p.i:]), Accepted)
}

// expr reads identifiers separated by dots, each maybe called.
func (p *exprParser) expr(depth int) (*Expr, error) {
	e := &Expr{}
	for {
		p.space()
		part := Part{Offset: p.i}
		name, err := p.ident()
		if err != nil {
			return nil, err
		}
		part.Name = name
		p.space()
		if p.at('(') {
			if depth == maxNesting {
				return nil, fmt.Errorf("calls nest more than %d deep", maxNesting)
			}
			p.i++
			part.Call = true
			if part.Args, err = p.args(depth + 1); err != nil {
				return nil, err
			}
			p.space()
		}
		e.Parts = append(e.Parts, part)
		if !p.at('.') {
			return e, nil
		}
		p.i++
	}
}

// args reads a call's arguments and its closing parenthesis.
func (p *exprParser) args(depth int) ([]*Expr, error) {
	p.space()
	if p.at(')') {
		p.i++
		return nil, nil
	}
	var args []*Expr
	for {
		a, err := p.expr(depth)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		p.space()
		switch {
		case p.at(','):
			p.i++
		case p.at(')'):
			p.i++
			return args, nil
		case p.i == len(p.s):
			return nil, errors.New(`a call must end with ")": principal(ctx)`)
		default:
			return nil, p.unexpected()
		}
	}
}

// ident reads an identifier. A word of letters, digits, '_' and '-' that
// is not one is reported as such; anything else is not part of the
// grammar.
func (p *exprParser) ident() (string, error) {
	start := p.i
	for p.i < len(p.s) {
		r, size := utf8.DecodeRuneInString(p.s[p.i:])
		if r != '_' && r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			break
		}
		p.i += size
	}
	word := p.s[start:p.i]
	if word == "" {
		return "", p.unexpected()
	}
	if strings.Trim(word, "0123456789") == "" {
		return "", fmt.Errorf("a literal (%s) is not accepted; %s", word, Accepted)
	}
	if err := checkIdent(word); err != nil {
		return "", err
	}
	return word, nil
}
