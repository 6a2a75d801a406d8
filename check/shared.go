package check

import (
	"go/types"
	"sort"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/parser"
)

// registerShared records the shared lines the package's types declare,
// reporting a name declared twice: a shared line is declared once.
func (c *collector) registerShared() {
	c.shared = map[string]*parser.Directive{}
	for _, t := range c.targets {
		for _, d := range t.sharedDirs {
			if c.broken[d] {
				continue
			}
			if first, dup := c.shared[d.Shared]; dup {
				c.errorf(d.Pos, "shared line %s is declared twice; declare it once, and have the methods of other types take it with shared=%s alone", d.Shared, d.Shared).
					AddNote(first.Pos, "first declaration of %s", d.Shared)
				continue
			}
			if a, ok := d.Arg("prefetch"); ok {
				c.errorf(a.NamePos, "prefetch= does not go on shared line %s: leasing a shared line is not offered; put prefetch= on a method's own line", d.Shared)
			}
			c.shared[d.Shared] = d
		}
	}
}

// sharedLines splits dirs, the directives that limit method fn of t, into
// the method's own lines and the shared lines it takes: those t declares,
// when fn has lines of its own or of t's, and those its shared= lines
// alone name, each once, in that order. A name no type declares is
// reported.
func (c *collector) sharedLines(t *target, fn *types.Func, dirs []*parser.Directive) (own, shared []*parser.Directive) {
	taken := map[string]bool{}
	take := func(d *parser.Directive) {
		if !taken[d.Shared] && !c.broken[d] {
			taken[d.Shared] = true
			shared = append(shared, d)
			if c.sharedUsed == nil {
				c.sharedUsed = map[*parser.Directive]bool{}
			}
			c.sharedUsed[d] = true
		}
	}
	var joins []*parser.Directive
	for _, d := range dirs {
		if d.JoinsShared() {
			joins = append(joins, d)
		} else {
			own = append(own, d)
		}
	}
	if len(own) > 0 {
		for _, d := range t.sharedDirs {
			take(d)
		}
	}
	for _, j := range joins {
		d, ok := c.shared[j.Shared]
		if !ok {
			a, _ := j.Arg("shared")
			c.errorf(a.ValuePos, "%s.%s takes shared line %s, which no type of the package declares%s", t.obj.Name(), fn.Name(), j.Shared, c.sharedHint(j.Shared))
			continue
		}
		take(d)
	}
	return own, shared
}

// sharedHint suggests the declared shared line name closest to name, or
// lists the declared names.
func (c *collector) sharedHint(name string) string {
	var names []string
	for n := range c.shared {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "; declare it in the doc comment of a type: //ratelimit:shared=" + name + " period=... threshold=..."
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return "; did you mean " + n + "?"
		}
	}
	return "; the package declares " + strings.Join(names, ", ")
}

// checkSharedUsed reports a shared line that no method takes: it would
// limit nothing.
func (c *collector) checkSharedUsed() {
	for _, t := range c.targets {
		for _, d := range t.sharedDirs {
			if !c.broken[d] && !c.sharedUsed[d] && c.shared[d.Shared] == d {
				c.errorf(d.Pos, "shared line %s limits no method: it adds to the lines of each method of %s that has limits (its own or the type's), and to each method that takes it with shared=%s alone; there is none", d.Shared, t.obj.Name(), d.Shared)
			}
		}
	}
}
