// Package parser reads //ratelimit: directives from Go comments.
//
// A directive is a comment line that starts exactly with "//ratelimit:"
// followed by space-separated name=value pairs:
//
//	//ratelimit:period=30 threshold=2
//	//ratelimit:period=1m30s threshold=100 key=req.UserID name=search
//
// Values that contain spaces are double-quoted, with Go string escapes.
// The parser checks the syntax and each value on its own; whether a key=
// names a parameter of the method is checked by the generator, which knows
// the types, using the positions recorded here.
package parser

import (
	"go/token"
	"time"
)

// Prefix starts every directive comment.
const Prefix = "//ratelimit:"

// Directive is one parsed //ratelimit: line.
type Directive struct {
	// Pos is the position of the "//" that starts the directive.
	Pos token.Position
	// Period is the window length (period=).
	Period time.Duration
	// Threshold is the number of calls admitted per Period (threshold=).
	Threshold int64
	// Key is the per-call key path (key=): the parameter name followed by
	// field or method names, e.g. ["req", "User", "ID"]. Nil when absent.
	Key []string
	// Name overrides the limit identity (name=); empty when absent.
	Name string
	// Cost is the static cost (cost=<int>); zero when absent or when
	// CostParam is set.
	Cost int64
	// CostParam is the parameter that gives the cost (cost=<param>).
	CostParam string
	// Algorithm is the algorithm name (algorithm=); empty when absent.
	Algorithm string
	// Burst is the bucket capacity (burst=); zero when absent.
	Burst int64
	// Capacity bounds the leaky bucket's queue (capacity=); zero when absent.
	Capacity int64
	// Wait is how long a call may wait to be admitted (wait=); zero when absent.
	Wait time.Duration
	// OnError is "allow" or "deny" (onerror=); empty when absent.
	OnError string
	// Shadow reports shadow=true.
	Shadow bool
	// Args holds every argument as written, in order, with its position,
	// so later checks can point at the offending token.
	Args []Arg
}

// Arg is one name=value pair as written.
type Arg struct {
	// Name is the argument name, such as "period".
	Name string
	// Value is the value with quotes removed.
	Value string
	// NamePos is the position of the first byte of Name.
	NamePos token.Position
	// ValuePos is the position of the first byte of the value as written
	// (its opening quote when quoted).
	ValuePos token.Position
}

// Arg returns the argument called name and whether it was given.
func (d *Directive) Arg(name string) (Arg, bool) {
	for _, a := range d.Args {
		if a.Name == name {
			return a, true
		}
	}
	return Arg{}, false
}
