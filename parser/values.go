package parser

import (
	"cmp"
	"errors"
	"fmt"
	"go/token"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// Algorithms lists the algorithm names the grammar accepts, in a fixed
// order: every algorithm the runtime decides.
var Algorithms = limitfacts.Names(nil)

// option is one name the grammar accepts and how its value is checked and
// stored.
type option struct {
	name string
	// set checks value and stores it in d. Its error describes the problem
	// with the value, and is reported as `name "value": problem`.
	set func(d *Directive, value string) error
}

// options lists every name, in the order String renders them.
var options = []option{
	{"period", setPeriod},
	{"threshold", setThreshold},
	{"tz", setTZ},
	{"key", setKey},
	{"name", setName},
	{"shared", setShared},
	{"cost", setCost},
	{"settle", setSettle},
	{"refund", setRefund},
	{"concurrency", setConcurrency},
	{"lease", setLease},
	{"algorithm", setAlgorithm},
	{"burst", setBurst},
	{"capacity", setCapacity},
	{"prefetch", setPrefetch},
	{"cooldown", setCooldown},
	{"wait", setWait},
	{"onerror", setOnError},
	{"shadow", setShadow},
	{"emptykey", setEmptyKey},
	{"keyhash", setKeyHash},
	{"decorator", setDecorator},
}

// optionNames lists the names of options, in order.
var optionNames = func() []string {
	var names []string
	for _, o := range options {
		names = append(names, o.name)
	}
	return names
}()

// lookupOption returns the option called name.
func lookupOption(name string) (option, bool) {
	for _, o := range options {
		if o.name == name {
			return o, true
		}
	}
	return option{}, false
}

func setPeriod(d *Directive, s string) error {
	if limitfacts.IsCalendar(s) {
		d.Calendar = s
		return nil
	}
	v, err := limitfacts.ParseDuration(s)
	switch {
	case err != nil && len(s) > 2 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "":
		// A word: a calendar period, misspelled.
		calendars := strings.Join(limitfacts.Calendars(), ", ")
		if alt := cmp.Or(adjectives[strings.ToLower(s)], suggest(s, limitfacts.Calendars())); alt != "" {
			return fmt.Errorf("unknown calendar period; did you mean %s?", alt)
		}
		return fmt.Errorf("want a calendar period (%s), whole seconds (30) or a Go duration (500ms, 1m30s)", calendars)
	case err != nil:
		return err
	case v <= 0:
		return errors.New("must be positive")
	case v < limitfacts.MinPeriod:
		return fmt.Errorf("must be at least %s", limitfacts.MinPeriod)
	}
	d.Period = v
	return nil
}

// adjectives maps the adjectives of the calendar periods, which a directive
// may be written with, to the periods.
var adjectives = map[string]string{"daily": "day", "weekly": "week", "monthly": "month", "yearly": "year", "annual": "year", "annually": "year"}

// setTZ accepts an IANA time zone, loaded from the generating machine's
// tz database (or Go's embedded one), as the generated code loads it.
func setTZ(d *Directive, s string) error {
	if _, err := limitfacts.LoadZone(s); err != nil {
		if s == "Local" {
			return errors.New("each machine's own zone: name an IANA zone such as Europe/Paris")
		}
		return errors.New("unknown time zone; want an IANA name such as Europe/Paris or UTC")
	}
	d.TZ = s
	return nil
}

func setThreshold(d *Directive, s string) error {
	n, err := parseCount(s)
	d.Threshold = n
	return err
}

func setKey(d *Directive, s string) error {
	e, err := parseExpr(s)
	d.Key = e
	return err
}

func setName(d *Directive, s string) error {
	if !validName(s) {
		return errors.New("want letters, digits, '_', '.', '-' and '/', starting with a letter or '_'")
	}
	d.Name = s
	return nil
}

// setShared accepts the name of a shared line, spelled as a limit name.
func setShared(d *Directive, s string) error {
	if !validName(s) {
		return errors.New("want letters, digits, '_', '.', '-' and '/', starting with a letter or '_'")
	}
	d.Shared = s
	return nil
}

// setCost accepts a positive whole number (Cost), or a path or a call
// (CostExpr). A value that starts like a number is taken as a number.
func setCost(d *Directive, s string) error {
	if s[0] == '+' || s[0] == '-' || isDigit(s[0]) {
		n, err := parseCount(s)
		if err == errWantCount {
			return errors.New("want a positive whole number, a parameter, a path or a function call")
		}
		d.Cost = n
		return err
	}
	e, err := parseExpr(s)
	d.CostExpr = e
	return err
}

// setSettle accepts a path or a call (Settle), or a whole number
// (SettleUnits: settle=0 charges nothing once the call returns).
func setSettle(d *Directive, s string) error {
	if s[0] == '+' || s[0] == '-' || isDigit(s[0]) {
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil || s[0] == '+':
			return errors.New("want a result, a path of fields and methods from one, a function call, len(x) or a whole number")
		case n < 0 || n > limitfacts.MaxValue:
			return fmt.Errorf("want a whole number from 0 to %d", int64(limitfacts.MaxValue))
		}
		d.SettleUnits = &n
		return nil
	}
	e, err := parseExpr(s)
	d.Settle = e
	return err
}

// setRefund accepts error, success (Refund) or a function call
// (RefundExpr), such as retryable(err) or errs.Retryable(err).
func setRefund(d *Directive, s string) error {
	if s == "error" || s == "success" {
		d.Refund = s
		return nil
	}
	e, err := parseExpr(s)
	if err != nil {
		return err
	}
	if last := e.Parts[len(e.Parts)-1]; !last.Call || len(e.Parts) > 2 || (len(e.Parts) == 2 && e.Parts[0].Call) {
		return errors.New("want error, success or a function of the error, such as retryable(err) or errs.Retryable(err)")
	}
	d.RefundExpr = e
	return nil
}

func setConcurrency(d *Directive, s string) error {
	n, err := parseCount(s)
	d.Concurrency = n
	return err
}

func setLease(d *Directive, s string) error {
	v, err := limitfacts.ParseDuration(s)
	switch {
	case err != nil:
		return err
	case v < limitfacts.MinLease:
		return fmt.Errorf("must be at least %s", limitfacts.MinLease)
	}
	d.Lease = v
	return nil
}

func setAlgorithm(d *Directive, s string) error {
	if _, ok := limitfacts.Lookup(s); !ok {
		if alt := suggest(s, Algorithms); alt != "" {
			return fmt.Errorf("unknown algorithm; did you mean %s?", alt)
		}
		return fmt.Errorf("unknown algorithm; want one of %s", strings.Join(Algorithms, ", "))
	}
	d.Algorithm = s
	return nil
}

func setBurst(d *Directive, s string) error {
	n, err := parseCount(s)
	d.Burst = n
	return err
}

func setCapacity(d *Directive, s string) error {
	n, err := parseCount(s)
	d.Capacity = n
	return err
}

func setPrefetch(d *Directive, s string) error {
	v, err := limitfacts.ParseDuration(s)
	switch {
	case err != nil:
		return err
	case v <= 0:
		return errors.New("must be positive")
	}
	d.Prefetch = v
	return nil
}

func setCooldown(d *Directive, s string) error {
	switch s {
	case "true":
		d.Cooldown = true
	case "false":
		d.Cooldown = false
	default:
		return errors.New("want true or false")
	}
	return nil
}

func setWait(d *Directive, s string) error {
	v, err := limitfacts.ParseDuration(s)
	switch {
	case err != nil:
		return err
	case v < 0:
		return errors.New("must not be negative")
	}
	d.Wait = v
	return nil
}

// onErrorValues lists the values onerror= accepts, in a fixed order.
var onErrorValues = []string{"allow", "deny", "local"}

func setOnError(d *Directive, s string) error {
	if !slices.Contains(onErrorValues, s) {
		if alt := suggest(s, onErrorValues); alt != "" {
			return fmt.Errorf("unknown policy; did you mean %s?", alt)
		}
		return errors.New("want allow, deny or local")
	}
	d.OnError = s
	return nil
}

func setShadow(d *Directive, s string) error {
	switch s {
	case "true":
		d.Shadow = true
	case "false":
		d.Shadow = false
	default:
		return errors.New("want true or false")
	}
	return nil
}

func setKeyHash(d *Directive, s string) error {
	switch s {
	case "true":
		d.KeyHash = true
	case "false":
		d.KeyHash = false
	default:
		return errors.New("want true or false")
	}
	return nil
}

func setEmptyKey(d *Directive, s string) error {
	if s != "share" && s != "deny" {
		return errors.New("want share or deny")
	}
	d.EmptyKey = s
	return nil
}

// setDecorator accepts the name of a Go type to declare.
func setDecorator(d *Directive, s string) error {
	if !token.IsIdentifier(s) || s == "_" {
		return errors.New("want a Go identifier to name the decorator type")
	}
	d.Decorator = s
	return nil
}

var errWantCount = errors.New("want a positive whole number")

// parseCount parses a positive whole number that fits in an int64. It
// returns 0 with the error.
func parseCount(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err == nil && n > 0:
		return n, nil
	case err == nil, errors.Is(err, strconv.ErrRange) && s[0] == '-':
		return 0, errors.New("must be positive")
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("too large (max %d)", int64(math.MaxInt64))
	}
	return 0, errWantCount
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// checkIdent reports why s cannot name a parameter or field, or nil if it
// can.
func checkIdent(s string) error {
	switch {
	case s == "_":
		return errors.New("the blank identifier _ names no parameter or field")
	case token.IsKeyword(s):
		return fmt.Errorf("%s is a Go keyword, not a parameter or field", s)
	case !token.IsIdentifier(s):
		return fmt.Errorf("%s is not a Go identifier", quote(s))
	}
	return nil
}

// validName reports whether s is a usable limit name: ASCII letters,
// digits, '_', '.', '-' and '/', starting with a letter or '_'.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
		switch {
		case letter:
		case i > 0 && (isDigit(c) || c == '.' || c == '-' || c == '/'):
		default:
			return false
		}
	}
	return s != ""
}

// quote returns s as a Go string literal for a message, shortened when long
// so that a huge token does not make a huge message.
func quote(s string) string {
	const limit = 40
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

func isRuneStart(c byte) bool { return c&0xC0 != 0x80 }
