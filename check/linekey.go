package check

import (
	"cmp"
	"strconv"

	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
)

// keys gives each limit of r the key of its line (key=, qualified by the
// line's emptykey= and keyhash=), checked against the signature; a line
// without key= is one limit for every call of the method. Lines with the
// same key expression share one *model.Key, so the decorator computes it
// once, and must agree on emptykey= and keyhash=: a key's value is
// denied when empty, or hashed, for every line that uses it or for none.
func (rc *ruleChecker) keys(r *model.Rule) {
	type first struct {
		d   *parser.Directive
		key *model.Key
	}
	seen := map[string]first{}
	for i, d := range rc.dirs {
		a, ok := d.Arg("key")
		if !ok {
			rc.checkUnkeyed(d)
			continue
		}
		src := d.Key.String()
		if f, ok := seen[src]; ok && f.key != nil {
			rc.checkAgree(f.d, d)
			r.Limits[i].Key = f.key
			continue
		}
		// A key that did not resolve is resolved again on each line, so
		// that each line's error is reported at that line.
		w := rc.value(a, d.Key)
		if w == nil {
			continue
		}
		k := w.key()
		if k == nil {
			continue
		}
		k.DenyEmpty, k.Hash = d.EmptyKey == "deny", d.KeyHash
		seen[src] = first{d, k}
		r.Limits[i].Key = k
	}
}

// checkKeysAlone checks the key= of each line that parsed one against the
// signature, reporting what does not resolve, for a rule that has lines
// with syntax errors: no rule is built, but the line's other problems are
// reported with them.
func (rc *ruleChecker) checkKeysAlone() {
	for _, d := range rc.dirs {
		if a, ok := d.Arg("key"); ok && d.Key != nil {
			rc.value(a, d.Key)
		}
	}
}

// checkUnkeyed reports emptykey= and keyhash=true on a line without
// key=: they qualify the key of their own line, and such a line has none.
func (rc *ruleChecker) checkUnkeyed(d *parser.Directive) {
	hint := ""
	for _, o := range rc.dirs {
		if o.Key != nil {
			k := o.Key.String()
			hint = "; for a limit per " + k + " on this line too, write key=" + k + " on it"
			break
		}
	}
	if a, ok := d.Arg("emptykey"); ok {
		rc.errorf(a.NamePos, "emptykey=%s needs key= on its line: a line without key= is one limit for every call, under no key%s", d.EmptyKey, hint)
	}
	if a, ok := d.Arg("keyhash"); ok && d.KeyHash {
		rc.errorf(a.NamePos, "keyhash=true needs key= on its line: it limits each call under the digest of its line's key%s", hint)
	}
}

// checkAgree reports d, a line keyed like the earlier line first, when
// the two disagree on emptykey= or keyhash=, suggesting the setting that
// denies or hides more on every line.
func (rc *ruleChecker) checkAgree(first, d *parser.Directive) {
	key, _ := d.Arg("key")
	k := d.Key.String()
	for _, c := range []struct {
		name, strict string
		value        func(*parser.Directive) string
	}{
		{"emptykey", "deny", func(d *parser.Directive) string { return cmp.Or(d.EmptyKey, "share") }},
		{"keyhash", "true", func(d *parser.Directive) string { return strconv.FormatBool(d.KeyHash) }},
	} {
		was, is := c.value(first), c.value(d)
		if was == is {
			continue
		}
		pos := key.NamePos
		if a, ok := d.Arg(c.name); ok {
			pos = a.NamePos
		}
		notePos := first.Pos
		if a, ok := first.Arg(c.name); ok {
			notePos = a.NamePos
		}
		rc.errorf(pos, "%s=%s here but %s=%s on another line keyed by %s: it applies to the key, so write %s=%s on every line keyed by %s",
			c.name, is, c.name, was, k, c.name, c.strict, k).
			AddNote(notePos, "%s=%s of key=%s", c.name, was, k)
	}
}
