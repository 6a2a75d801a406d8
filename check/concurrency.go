package check

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
