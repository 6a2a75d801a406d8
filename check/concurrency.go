package check

import "github.com/ratelimitgen/ratelimitgen/model"

// checkConcurrency reports every concurrency line of a method after its
// first: a method has at most one.
func (rc *ruleChecker) checkConcurrency() {
	first := -1
	for i, d := range rc.dirs {
		if d.Concurrency == 0 {
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		a, _ := d.Arg("concurrency")
		f, _ := rc.dirs[first].Arg("concurrency")
		rc.errorf(a.NamePos, "%s has more than one concurrency line: its calls hold one slot at most", rc.where).
			AddNote(f.NamePos, "first concurrency=%s", f.Value)
	}
}

// checkReservedKeys reports a method whose calls are reserved (settle=, or
// a concurrency line) but whose lines have keys of their own: a
// reservation is made, settled and given back under one key (see
// ratelimit.Rule.Reserve), so its lines must share their key=.
func (rc *ruleChecker) checkReservedKeys(r *model.Rule) {
	if _, shared := r.SharedKey(); shared || rc.takesShared() != nil {
		return // one key; or shared lines, which checkSharedReserved reports
	}
	for _, d := range rc.dirs {
		name := ""
		for _, n := range []string{"settle", "refund"} {
			if _, ok := d.Arg(n); ok && name == "" {
				name = n
			}
		}
		if d.Concurrency != 0 {
			name = "concurrency"
		} else if name == "" {
			continue
		}
		a, _ := d.Arg(name)
		rc.errorf(a.NamePos, "%s= needs every line of %s to have the same key=, as its calls are reserved under one key; write the same key= on each line", name, rc.where)
		return
	}
}
