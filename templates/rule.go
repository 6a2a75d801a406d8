package templates

import (
	"strconv"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/model"
)

// ruleVar declares the rule of one limited method:
//
//	var storeGetRateLimit = &ratelimit.Rule{
//		Name:   "example.com/svc.Store.Get",
//		Limits: []ratelimit.Limit{{Period: 30 * time.Second, Threshold: 2}},
//	}
func (r *renderer) ruleVar(g *jen.Group, p *decoratorPlan, m *methodPlan) {
	rule := m.Rule
	doc(g, m.rule+" is the rule of "+p.Type.Obj().Name()+"."+m.Name+": "+summary(rule)+".")
	fields := []jen.Code{
		jen.Id("Name").Op(":").Lit(rule.Name),
		jen.Id("Limits").Op(":").Add(r.limits(rule.Limits)),
	}
	if _, shared := rule.SharedKey(); !shared {
		exprs := make([]jen.Code, len(rule.Limits))
		for i, l := range rule.Limits {
			exprs[i] = jen.Lit("")
			if l.Key != nil {
				exprs[i] = jen.Lit(l.Key.Source)
			}
		}
		fields = append(fields, jen.Id("KeyExprs").Op(":").Index().String().Values(exprs...))
	}
	if hashed := keyHashes(rule); hashed != nil {
		fields = append(fields, jen.Id("KeyHash").Op(":").Index().Bool().Values(hashed...))
	}
	if rule.HasShared() {
		names := make([]jen.Code, len(rule.Limits))
		for i, l := range rule.Limits {
			names[i] = jen.Lit(l.Shared)
		}
		fields = append(fields, jen.Id("Shared").Op(":").Index().String().Values(names...))
	}
	if rule.Wait != 0 {
		fields = append(fields, jen.Id("Wait").Op(":").Add(duration(rule.Wait)))
	}
	switch rule.OnError {
	case "allow":
		fields = append(fields, jen.Id("OnError").Op(":").Add(r.rt("FailOpen")))
	case "deny":
		fields = append(fields, jen.Id("OnError").Op(":").Add(r.rt("FailClosed")))
	case "local":
		fields = append(fields, jen.Id("OnError").Op(":").Add(r.rt("FailLocal")))
	}
	if rule.Shadow {
		fields = append(fields, jen.Id("Shadow").Op(":").True())
	}
	if rule.Refund == "success" {
		fields = append(fields, jen.Id("OnlyFailures").Op(":").True())
	}
	g.Var().Id(m.rule).Op("=").Op("&").Add(r.rt("Rule")).Add(multiline(fields...))
}

// keyHashes returns, when a limit of rule is keyed by a digest
// (keyhash=true), whether each is; else nil.
func keyHashes(rule *model.Rule) []jen.Code {
	some := false
	out := make([]jen.Code, len(rule.Limits))
	for i, l := range rule.Limits {
		h := l.Key != nil && l.Key.Hash
		some = some || h
		out[i] = jen.Lit(h)
	}
	if !some {
		return nil
	}
	return out
}

// rulesFunc declares the function that returns the package's rules, in
// the order of the file (by decorator, then method):
//
//	// RateLimitRules returns ...
//	func RateLimitRules() []*ratelimit.Rule {
//		return []*ratelimit.Rule{
//			storeGetRateLimit.Clone(),
//			storePutRateLimit.Clone(),
//		}
//	}
func (r *renderer) rulesFunc(g *jen.Group) {
	var rules []jen.Code
	for _, p := range r.decs {
		for _, m := range p.methods {
			if m.rule != "" {
				rules = append(rules, jen.Id(m.rule).Dot("Clone").Call())
			}
		}
	}
	doc(g, model.RulesFunc+" returns the rules of the package's rate-limited methods, one per "+
		"method, ordered by decorated type and method name, such as for httplimit.AdminHandler. "+
		"Each call returns new copies: changing them changes no decorator.")
	list := jen.Index().Op("*").Add(r.rt("Rule"))
	if len(rules) == 1 {
		list = list.Values(rules...)
	} else {
		list = list.Add(multiline(rules...))
	}
	g.Func().Id(model.RulesFunc).Params().Index().Op("*").Add(r.rt("Rule")).Block(jen.Return(list))
}

// limits returns the Limits slice: on one line for a single limit, one
// limit per line otherwise.
func (r *renderer) limits(limits []model.Limit) *jen.Statement {
	items := make([]jen.Code, len(limits))
	for i, l := range limits {
		items[i] = limitValue(l)
	}
	s := jen.Index().Add(r.rt("Limit"))
	if len(limits) == 1 && limits[0].Algorithm == "" {
		return s.Values(items...) // {{Period: 30 * time.Second, Threshold: 2}}
	}
	return s.Add(multiline(items...))
}

// limitValue writes a Limit with its non-zero fields only.
func limitValue(l model.Limit) *jen.Statement {
	if l.Algorithm == limitfacts.Concurrency {
		return concurrencyValue(l)
	}
	fields := []jen.Code{jen.Id("Period").Op(":").Add(duration(l.Period))}
	if l.Calendar != "" {
		fields = []jen.Code{jen.Id("Calendar").Op(":").Lit(l.Calendar)}
		if l.TZ != "" {
			fields = append(fields, jen.Id("TZ").Op(":").Lit(l.TZ))
		}
	}
	fields = append(fields, jen.Id("Threshold").Op(":").Lit(int(l.Threshold)))
	if l.Algorithm != "" {
		fields = append(fields, jen.Id("Algorithm").Op(":").Add(algorithm(l.Algorithm)))
	}
	if l.Burst != 0 {
		fields = append(fields, jen.Id("Burst").Op(":").Lit(int(l.Burst)))
	}
	if l.Capacity != 0 {
		fields = append(fields, jen.Id("Capacity").Op(":").Lit(int(l.Capacity)))
	}
	if l.Prefetch != 0 {
		fields = append(fields, jen.Id("Prefetch").Op(":").Add(duration(l.Prefetch)))
	}
	if l.PerCall {
		fields = append(fields, jen.Id("PerCall").Op(":").True())
	}
	if l.Cooldown {
		fields = append(fields, jen.Id("Cooldown").Op(":").True())
	}
	return jen.Values(fields...)
}

// multiline returns a composite literal body with one element per line.
func multiline(items ...jen.Code) *jen.Statement {
	return jen.Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}, items...)
}

// durationUnits are the units durations are written in, largest first.
var durationUnits = []struct {
	d      time.Duration
	name   string
	abbrev string
}{
	{time.Hour, "Hour", "h"},
	{time.Minute, "Minute", "m"},
	{time.Second, "Second", "s"},
	{time.Millisecond, "Millisecond", "ms"},
	{time.Microsecond, "Microsecond", "µs"},
	{time.Nanosecond, "Nanosecond", "ns"},
}

// unitOf returns the largest unit that divides d, and how many of it d is.
func unitOf(d time.Duration) (n int64, unit, abbrev string) {
	for _, u := range durationUnits {
		if d%u.d == 0 {
			return int64(d / u.d), u.name, u.abbrev
		}
	}
	return int64(d), "Nanosecond", "ns"
}

// duration writes d as a whole number of its largest exact unit:
// 30 * time.Second, 500 * time.Millisecond, 90 * time.Second, time.Minute.
func duration(d time.Duration) *jen.Statement {
	n, unit, _ := unitOf(d)
	if n == 1 {
		return jen.Qual("time", unit)
	}
	return jen.Lit(int(n)).Op("*").Qual("time", unit)
}

// proseDuration writes d for prose in the same unit: second, 30s, 90s,
// 500ms, minute.
func proseDuration(d time.Duration) string {
	n, unit, abbrev := unitOf(d)
	if n == 1 {
		return strings.ToLower(unit)
	}
	return strconv.FormatInt(n, 10) + abbrev
}

// prosePeriod writes a limit's period for prose: as proseDuration, or its
// calendar period, with its zone unless UTC: "month in Europe/Paris".
func prosePeriod(l model.Limit) string {
	switch {
	case l.Calendar == "":
		return proseDuration(l.Period)
	case l.TZ == "" || l.TZ == "UTC":
		return l.Calendar
	}
	return l.Calendar + " in " + l.TZ
}

// summary describes the rule in prose: "2 calls per 30s per id".
func summary(rule *model.Rule) string {
	parts := make([]string, len(rule.Limits))
	unit := "calls"
	if rule.Cost != 0 || rule.CostValue != nil {
		unit = "units"
	}
	for i, l := range rule.Limits {
		if l.Algorithm == limitfacts.Concurrency {
			parts[i] = concurrencySummary(l)
			continue
		}
		u := unit
		if l.PerCall {
			u = "calls"
		}
		if l.Threshold == 1 {
			u = strings.TrimSuffix(unit, "s")
		}
		parts[i] = strconv.FormatInt(l.Threshold, 10) + " " + u + " per " + prosePeriod(l)
		if l.Algorithm != "" {
			parts[i] += " (" + l.Algorithm + ")"
		}
	}
	k, shared := rule.SharedKey()
	switch {
	case !shared:
		for i, l := range rule.Limits {
			switch {
			case l.Key == nil:
				parts[i] += " in total"
			case l.Key.Hash:
				parts[i] += " for each digest of " + l.Key.Source
			default:
				parts[i] += " for each " + l.Key.Source
			}
		}
	case k != nil && k.Hash:
		parts[len(parts)-1] += " for each " + k.Source + ", known by its digest"
	case k != nil:
		parts[len(parts)-1] += " for each " + k.Source
	}
	for i, l := range rule.Limits {
		if l.Shared != "" {
			parts[i] += " on the shared line " + l.Shared[strings.LastIndexByte(l.Shared, '#')+1:]
		}
	}
	return andList(parts)
}

// andList joins items as prose: "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// algorithm renders an algorithm as the runtime's constant, such as
// ratelimit.TokenBucket, or as a conversion for a name it has none for.
func algorithm(name string) jen.Code {
	if a, ok := limitfacts.Lookup(name); ok {
		return jen.Qual(RuntimePath, a.Const)
	}
	return jen.Qual(RuntimePath, "Algorithm").Call(jen.Lit(name))
}
