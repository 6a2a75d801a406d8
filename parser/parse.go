package parser

import (
	"cmp"
	"errors"
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// ParseComment parses one raw comment as found in ast.Comment.Text,
// including its leading "//" or "/*". pos is the position of the comment's
// first '/'; every diagnostic is positioned relative to it, so it carries
// the comment's absolute line and column in the file.
//
// It returns (nil, nil) for an ordinary comment; nil and an error for a
// lookalike (a probable misspelling of a directive, see docs/directives.md);
// and a *Directive for a directive line, with any errors found in it. When
// the errors are not empty, the directive is only partly filled in: it is
// returned so that callers can keep checking (and reporting) what did
// parse, but must not be used to generate code.
func ParseComment(pos token.Position, text string) (*Directive, ErrorList) {
	if !strings.HasPrefix(text, Prefix) {
		return nil, checkLookalike(pos, text)
	}
	p := &lineParser{
		pos:       pos,
		text:      text,
		d:         &Directive{Pos: pos},
		first:     make(map[string]token.Position),
		mentioned: make(map[string]bool),
	}
	p.parseArgs()
	p.checkArgs()
	return p.d, p.errs
}

// ParseCommentGroup parses every comment of cg, reading the raw cg.List
// because CommentGroup.Text drops directive lines. It returns the
// directives in source order and the diagnostics of all of them, in source
// order. As with ParseComment, directives that have errors are returned
// too, partly filled in. A nil cg yields nothing.
func ParseCommentGroup(fset *token.FileSet, cg *ast.CommentGroup) ([]*Directive, ErrorList) {
	if cg == nil {
		return nil, nil
	}
	var (
		directives []*Directive
		errs       ErrorList
	)
	for _, c := range cg.List {
		if c == nil {
			continue
		}
		var pos token.Position
		if fset != nil {
			pos = fset.Position(c.Slash)
		}
		d, derrs := ParseComment(pos, c.Text)
		if d != nil {
			directives = append(directives, d)
		}
		errs = append(errs, derrs...)
	}
	return directives, errs
}

// lineParser parses the name=value pairs of one directive line.
type lineParser struct {
	pos  token.Position // position of text[0]
	text string         // the whole comment, starting with Prefix
	d    *Directive
	errs ErrorList
	// first maps each known name given so far to the position of its
	// first occurrence.
	first map[string]token.Position
	// mentioned holds the names that were attempted, even if malformed or
	// misspelled, so that a broken period= is not also reported missing.
	mentioned map[string]bool
}

// at returns the absolute position of text[i]. A line comment is one line,
// so only the column and offset move.
func (p *lineParser) at(i int) token.Position {
	pos := p.pos
	pos.Offset += i
	pos.Column += i
	return pos
}

func (p *lineParser) errorf(i int, format string, args ...any) {
	p.errs.Add(p.at(i), format, args...)
}

// parseArgs reads the space-separated pairs after Prefix.
func (p *lineParser) parseArgs() {
	i := len(Prefix)
	for {
		i = skipSpace(p.text, i)
		if i == len(p.text) {
			return
		}
		i = p.parseArg(i)
	}
}

// parseArg reads the pair that starts at text[start] (not a space), records
// and checks it, and returns the index just after it.
func (p *lineParser) parseArg(start int) int {
	eq := start
	for eq < len(p.text) && p.text[eq] != '=' && !isSpace(p.text[eq]) {
		eq++
	}
	name := p.text[start:eq]
	p.mentioned[name] = true
	if eq == len(p.text) || p.text[eq] != '=' {
		p.errorf(start, "expected name=value, found %s", quote(name))
		return eq
	}
	value, end, ok := p.scanValue(eq + 1)
	switch {
	case !ok:
		// scanValue reported the problem.
	case name == "":
		p.errorf(start, `missing name before "="`)
	case value == "":
		p.errorf(start, "empty value for %s", name)
	default:
		p.addArg(Arg{Name: name, Value: value, NamePos: p.at(start), ValuePos: p.at(eq + 1), Quoted: p.text[eq+1] == '"'})
	}
	return end
}

// scanValue reads the value that starts at text[i], quoted or not. It
// returns the value with quotes removed, the index just after it, and
// whether it was well formed (if not, it has reported why).
func (p *lineParser) scanValue(i int) (value string, end int, ok bool) {
	if i == len(p.text) || p.text[i] != '"' {
		end = i
		for end < len(p.text) && !isSpace(p.text[end]) {
			end++
		}
		return p.text[i:end], end, true
	}
	closing := findClosingQuote(p.text, i+1)
	if closing < 0 {
		p.errorf(i, "quoted value not terminated")
		return "", len(p.text), false
	}
	end = closing + 1
	raw := p.text[i:end]
	value, err := strconv.Unquote(raw)
	switch {
	case err == nil:
		ok = true
	case strings.Contains(raw, "\n"):
		p.errorf(i, "line break in quoted value")
	default:
		p.errorf(i, "invalid escape in quoted value")
	}
	if end < len(p.text) && !isSpace(p.text[end]) {
		next := end
		for end < len(p.text) && !isSpace(p.text[end]) {
			end++
		}
		p.errorf(next, "expected space after quoted value, found %s", quote(p.text[next:end]))
		ok = false
	}
	return value, end, ok
}

// findClosingQuote returns the index of the first '"' at or after i that is
// not escaped by a backslash, or -1.
func findClosingQuote(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case '\\':
			i += 2
		case '"':
			return i
		default:
			i++
		}
	}
	return -1
}

// addArg records a and checks its name and value. Only the first
// occurrence of a name sets the directive; a repeated one is still checked.
func (p *lineParser) addArg(a Arg) {
	p.d.Args = append(p.d.Args, a)
	opt, known := lookupOption(a.Name)
	if !known {
		if alt := suggest(a.Name, optionNames); alt != "" {
			p.mentioned[alt] = true
			p.errs.Add(a.NamePos, "unknown name %s; did you mean %s?", quote(a.Name), alt)
		} else {
			p.errs.Add(a.NamePos, "unknown name %s; want one of %s", quote(a.Name), strings.Join(optionNames, ", "))
		}
		return
	}
	target := p.d
	if first, dup := p.first[a.Name]; dup {
		p.errs.Add(a.NamePos, "duplicate %s", a.Name).AddNote(first, "first %s", a.Name)
		target = &Directive{} // check the value, but keep the first one
	} else {
		p.first[a.Name] = a.NamePos
	}
	if err := opt.set(target, a.Value); err != nil {
		p.errs.Add(a.ValuePos, "%s %s: %v", a.Name, quote(a.Value), err)
	}
}

// checkArgs checks what involves more than one pair: required names, names
// that only make sense with some algorithms, and values that some
// algorithms cannot decide. Like needAlgorithm, it says nothing more about
// the algorithm when the algorithm itself was invalid, which is reported
// already (p.d.Algorithm is then empty).
func (p *lineParser) checkArgs() {
	if pos, ok := p.first["decorator"]; ok || p.mentioned["decorator"] {
		if len(p.mentioned) > 1 {
			p.errs.Add(cmp.Or(pos, p.pos), "decorator= stands alone on its line: it names the type's decorator; write the limits on lines of their own")
		}
		return
	}
	if p.checkShared() {
		return
	}
	if p.checkConcurrency() {
		return
	}
	for _, name := range []string{"period", "threshold"} {
		if !p.mentioned[name] {
			p.errs.Add(p.pos, "missing required %s", name)
		}
	}
	p.needAlgorithm("burst", limitfacts.Names(func(a limitfacts.Algorithm) bool { return a.Burst }))
	p.needAlgorithm("capacity", limitfacts.Names(func(a limitfacts.Algorithm) bool { return a.Capacity }))
	d := p.d
	lim := limitfacts.Limit{Period: d.Period, Calendar: d.Calendar, TZ: d.TZ, Threshold: d.Threshold, Algorithm: d.Algorithm, Burst: d.Burst, Capacity: d.Capacity}
	if field, n := lim.Bound(); d.Cost > 0 && n > 0 && d.Cost > n {
		p.errs.Add(p.first["cost"], "cost %d exceeds %s %d: no call could ever be admitted", d.Cost, field, n)
	}
	alg := lim.Facts()
	if pos, ok := p.first["prefetch"]; ok && alg.Paces {
		p.errs.Add(pos, "prefetch does not go with algorithm=%s: its calls are each told their own delay, which no lease can tell", d.Algorithm)
	}
	if alg.WholeMilliseconds && d.Period > 0 && d.Period%time.Millisecond != 0 {
		p.errs.Add(p.first["period"], "period %s: %s needs a whole number of milliseconds (its Redis key expires with the window)", d.Period, alg.Name)
	}
	if d.Threshold > alg.MaxThreshold && d.Threshold <= limitfacts.MaxValue {
		p.errs.Add(p.first["threshold"], "threshold %d is above %d, the most %s counts (use %s)",
			d.Threshold, alg.MaxThreshold, alg.Name, orList(countsMore(alg, d.Threshold)))
	}
	if len(p.errs) > 0 {
		return // the limit is partly filled in, or its fault is reported
	}
	// What the runtime cannot decide and no message above words better,
	// such as a threshold above the most it counts.
	var fault *limitfacts.Error
	if errors.As(lim.Check(), &fault) {
		p.errs.Add(cmp.Or(p.first[fault.Field], p.pos), "%s", fault.Msg)
	}
}

// needAlgorithm reports name if it is given without one of algorithms. It
// stays quiet when the algorithm itself was invalid, which is reported
// already.
func (p *lineParser) needAlgorithm(name string, algorithms []string) {
	pos, given := p.first[name]
	if !given {
		return
	}
	if _, ok := p.first["algorithm"]; ok && p.d.Algorithm == "" {
		return
	}
	for _, a := range algorithms {
		if p.d.Algorithm == a {
			return
		}
	}
	p.errs.Add(pos, "%s needs algorithm=%s", name, strings.Join(algorithms, " or algorithm="))
}

// notWithShared are the names a shared line does not take: they are
// options of a method's calls, which each method sharing the line writes
// on its own lines, or they declare something else than a rate limit.
var notWithShared = []string{"name", "cost", "settle", "concurrency", "lease", "wait", "onerror", "shadow"}

// checkShared checks a line with shared=, and reports whether it is
// shared= alone (a method joining a shared line), which needs no limit.
func (p *lineParser) checkShared() bool {
	if _, ok := p.first["shared"]; !ok && !p.mentioned["shared"] {
		return false
	}
	if len(p.mentioned) == 1 {
		return true
	}
	for _, name := range notWithShared {
		if at, ok := p.first[name]; ok {
			p.errs.Add(at, "%s= does not go with shared=: a shared line is a rate limit (period=, threshold= and its key=); each method that takes it writes its %s= on its own lines", name, name)
		}
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// skipSpace returns the index of the first non-space byte of s at or after
// i, or len(s).
func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// checkLookalike reports a comment that is probably a misspelled directive
// (see docs/directives.md, Lookalikes, for the rule), or returns nil.
func checkLookalike(pos token.Position, text string) ErrorList {
	var body string
	switch {
	case strings.HasPrefix(text, "/*"):
		body = strings.TrimLeft(text[2:], " \t\r\n")
	case strings.HasPrefix(text, "//"):
		body = strings.TrimLeft(text[2:], " \t")
	default:
		return nil
	}
	n, nearMiss := lookalikeLen(body)
	if n == 0 {
		return nil
	}
	var errs ErrorList
	written := text[:len(text)-len(body)+n]
	switch {
	case nearMiss:
		errs.Add(pos, "%s is not a directive: did you mean %s?", quote(written), Prefix)
	case strings.HasPrefix(text, "/*"):
		errs.Add(pos, "%s is not a directive: write %q as a line comment", quote(written), Prefix)
	default:
		var fixes []string
		if len(body) != len(text)-2 {
			fixes = append(fixes, `with no space after "//"`)
		}
		if body[:len(directiveWord)] != directiveWord {
			fixes = append(fixes, "in lower case")
		}
		if body[n-1] != ':' {
			fixes = append(fixes, `with a colon after "ratelimit"`)
		}
		errs.Add(pos, "%s is not a directive: write %q %s", quote(written), Prefix, strings.Join(fixes, " and "))
	}
	return errs
}

// directiveWord is the word of Prefix, before its colon.
const directiveWord = "ratelimit"

// maxWordEdits is how far a word may be from directiveWord and still be
// taken for a misspelling of it: two edits (see editDistance), such as
// "ratelimt", "ratelimits", "rate-limit" or "rtaelimit".
const maxWordEdits = 2

// lookalikeLen returns how many bytes of s, the text of a comment after
// its "//" or "/*" and white space, look like a directive's "ratelimit:",
// and whether it is a near miss rather than the word itself in another
// case or without its colon; 0 when s does not look like a directive.
//
// s looks like a directive when it starts with a word (ASCII letters,
// digits, '-' and '_') that is "ratelimit" in any case or within
// maxWordEdits of it (ignoring case), followed by a separator (':' or '=',
// then optional spaces; or spaces) and a name=. The word "ratelimit" with
// a colon or spaces is the lookalike of an older rule; any other word or
// separator is a near miss. Requiring the name= keeps prose such as the
// HTTP header "RateLimit: "api";r=5" or "rate limits: see below" an
// ordinary comment.
func lookalikeLen(s string) (n int, nearMiss bool) {
	w := 0
	for w < len(s) && isWordByte(s[w]) {
		w++
	}
	word, rest := s[:w], s[w:]
	if rest == "" {
		return 0, false
	}
	exact := strings.EqualFold(word, directiveWord)
	if !exact && (abs(len(word)-len(directiveWord)) > maxWordEdits ||
		editDistance(strings.ToLower(word), directiveWord) > maxWordEdits) {
		return 0, false
	}
	switch {
	case rest[0] == ':' || rest[0] == '=':
		if startsWithNameEquals(skipSpaceString(rest[1:])) {
			return w + 1, !exact || rest[0] == '='
		}
	case isSpace(rest[0]):
		if startsWithNameEquals(skipSpaceString(rest)) {
			return w, !exact
		}
	}
	return 0, false
}

// isWordByte reports whether c may be part of the word lookalikeLen reads.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// startsWithNameEquals reports whether s starts with ASCII letters or '_'
// followed by '=', as in "period=30".
func startsWithNameEquals(s string) bool {
	i := 0
	for i < len(s) && ('a' <= s[i] && s[i] <= 'z' || 'A' <= s[i] && s[i] <= 'Z' || s[i] == '_') {
		i++
	}
	return i > 0 && i < len(s) && s[i] == '='
}

func skipSpaceString(s string) string { return s[skipSpace(s, 0):] }

// countsMore returns the names of the algorithms that, unlike alg, count
// threshold units, and like it keep a small state per key (not a log) and
// admit calls to run now (they do not pace them).
func countsMore(alg limitfacts.Algorithm, threshold int64) []string {
	return limitfacts.Names(func(a limitfacts.Algorithm) bool {
		return a.MaxThreshold >= threshold && a.State != limitfacts.Log && !a.Paces
	})
}

// orList joins names as prose: "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
