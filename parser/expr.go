package parser

import (
	"errors"
	"strings"
)

// Expr is the value of a key= or a cost= that is not a number: a path, a
// parameter followed by field or zero-argument method names
// (req.User.ID), or a call of a function of the package, or of a package
// the file imports, whose arguments are paths (principal(ctx),
// auth.Principal(ctx,req.Token)).
type Expr struct {
	// Path is the path; for a call, the function: [name] or [package, name].
	Path []string
	// Call says Path names a function, called with Args.
	Call bool
	Args [][]string
}

// String writes e as a directive does, without spaces: req.User.ID,
// auth.Principal(ctx,req).
func (e *Expr) String() string {
	s := strings.Join(e.Path, ".")
	if !e.Call {
		return s
	}
	args := make([]string, len(e.Args))
	for i, a := range e.Args {
		args[i] = strings.Join(a, ".")
	}
	return s + "(" + strings.Join(args, ",") + ")"
}

var errWantExpr = errors.New("want a parameter, a path such as req.User.ID, or a function call such as principal(ctx) or auth.Principal(ctx)")

// parseExpr parses a path or a call. Spaces may follow the commas of a
// call's arguments (quote the value then).
func parseExpr(s string) (*Expr, error) {
	fn, rest, call := strings.Cut(s, "(")
	path, err := parsePath(fn)
	if err != nil {
		return nil, err
	}
	if !call {
		return &Expr{Path: path}, nil
	}
	args, ok := strings.CutSuffix(rest, ")")
	switch {
	case !ok || strings.ContainsAny(args, "()"):
		return nil, errors.New(`a call must end with ")" and have paths as arguments: principal(ctx)`)
	case len(path) > 2:
		return nil, errors.New("want a function of the package or of an imported one: principal(ctx) or auth.Principal(ctx)")
	}
	e := &Expr{Path: path, Call: true}
	if strings.TrimSpace(args) == "" {
		return e, nil
	}
	for _, a := range strings.Split(args, ",") {
		p, err := parsePath(strings.TrimSpace(a))
		if err != nil {
			return nil, err
		}
		e.Args = append(e.Args, p)
	}
	return e, nil
}

// parsePath parses a dot-separated path of identifiers.
func parsePath(s string) ([]string, error) {
	segments := strings.Split(s, ".")
	for _, seg := range segments {
		if seg == "" {
			return nil, errWantExpr
		}
		if err := checkIdent(seg); err != nil {
			return nil, err
		}
	}
	return segments, nil
}
