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

// checkReservedKeys reports a method that holds a concurrency slot but
// whose lines have keys of their own: a slot is held under one key (see
// ratelimit.Rule.Reserve), so its lines must share their key=. (Settles
// and refunds take a key per line.)
func (rc *ruleChecker) checkReservedKeys(r *model.Rule) {
	if _, shared := r.SharedKey(); shared || rc.takesShared() != nil {
		return // one key; or shared lines, which checkSharedReserved reports
	}
	for _, d := range rc.dirs {
		if d.Concurrency == 0 {
			continue
		}
		a, _ := d.Arg("concurrency")
		rc.errorf(a.NamePos, "concurrency= needs every line of %s to have the same key=, as its calls hold a slot under one key; write the same key= on each line", rc.where)
		return
	}
}
