package templates

import (
	"go/token"
	"go/types"
	"strconv"
	"strings"
)

// names hands out identifiers that are unique within one scope. A name is
// taken when it was handed out or reserved, or when avoid reports it (the
// package scope of the user's code, or what a wrapped type already has).
type names struct {
	taken map[string]bool
	avoid func(string) bool
}

func newNames(avoid func(string) bool) *names {
	return &names{taken: make(map[string]bool), avoid: avoid}
}

// reserve marks names as taken without handing them out.
func (n *names) reserve(names ...string) {
	for _, name := range names {
		n.taken[name] = true
	}
}

// isTaken reports whether name cannot be handed out.
func (n *names) isTaken(name string) bool {
	return n.taken[name] || token.IsKeyword(name) || n.avoid != nil && n.avoid(name)
}

// fresh returns base if it is free, and otherwise base followed by the
// smallest number that makes it free, and marks the result taken.
func (n *names) fresh(base string) string {
	name := base
	for i := 1; n.isTaken(name); i++ {
		name = base + strconv.Itoa(i)
	}
	n.taken[name] = true
	return name
}

// first returns the first of candidates that is free, or a fresh variant of
// the first one, and marks it taken.
func (n *names) first(candidates ...string) string {
	for _, c := range candidates {
		if !n.isTaken(c) {
			n.taken[c] = true
			return c
		}
	}
	return n.fresh(candidates[0])
}

// inScope returns an avoid function that reports names declared in scope.
func inScope(scope *types.Scope) func(string) bool {
	if scope == nil {
		return nil
	}
	return func(name string) bool { return scope.Lookup(name) != nil }
}

// assumedPackageName returns the name goimports assumes for an import
// path: its last element without a major version suffix or a "go-" prefix,
// cut at the first '.' or '-'. An import whose package has another name is
// written with an explicit name.
func assumedPackageName(path string) string {
	elems := strings.Split(path, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && isMajorVersion(last) {
		last = elems[len(elems)-2]
	}
	last = strings.TrimPrefix(last, "go-")
	if i := strings.IndexAny(last, ".-"); i >= 0 {
		last = last[:i]
	}
	return last
}

func isMajorVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	_, err := strconv.Atoi(s[1:])
	return err == nil
}
