package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
)

// Admission describes a call that [Rule.Admit] admitted, or that
// [Rule.Check] admitted and recorded in a context from [WithAdmission].
type Admission struct {
	// Decided reports whether the other fields describe the call. It is
	// false when the call went ahead without a decision (the limiter
	// failed under [FailOpen]) and for the calls of a shadow rule, whose
	// limits clients should not see.
	Decided bool
	// Name is the rule's name, which clients see the limit by.
	Name string
	// Decision is the decision that admitted the call (after waiting,
	// the last one).
	Decision Decision
	// Limit is the limit Decision describes: of the limits the call was
	// decided against (the rule's, or their overrides), the one with the
	// fewest units remaining.
	Limit Limit
	// Limits and KeyExprs describe every limit of a call with a key per
	// limit (see Keys in the package doc): the limits it was decided against, and
	// the rule's KeyExprs. Decision.LimitIndex indexes them. Both are nil
	// for a call with one key, whose Limit is the one to describe. They
	// may be the rule's own slices: read them, never change them.
	Limits   []Limit
	KeyExprs []string
}

// WithAdmission returns a context derived from ctx in which [Rule.Check],
// and so every generated decorator, records the calls it admits, and a
// function that returns the recorded [Admission]: of the calls admitted
// with the context (or a context derived from it), the one with the
// fewest units remaining, the later one on a tie. A caller describes a
// decorated call to its own clients with it, such as in the RateLimit
// header fields of an HTTP response, without changing the decorated
// method:
//
//	ctx, admission := ratelimit.WithAdmission(r.Context())
//	item, err := store.Get(ctx, id)
//	...
//	httplimit.SetAdmissionHeaders(w.Header(), admission())
//
// Until a call is recorded, admission returns the zero Admission, whose
// Decided is false: a denied call returns its [*LimitError] instead, and
// a shadow rule's call or one that went ahead without a decision is not
// recorded. A method without a context parameter is checked with
// context.Background(), so its calls are never recorded; a method that
// takes a stream is checked with the stream's Context(). Calls may record
// concurrently, and admission may be called at any time. [Rule.Admit]
// returns the admission to its caller and records nothing.
func WithAdmission(ctx context.Context) (context.Context, func() Admission) {
	admissionsWanted.Store(true)
	rec := &admissionRecord{}
	return context.WithValue(ctx, admissionKey{}, rec), rec.get
}

// admissionsWanted is set by the first WithAdmission: until then no
// context can hold a record, and an admitted call does not look for one
// (a lookup walks the whole context chain of a request's context).
var admissionsWanted atomic.Bool

// admissionKey is the context key of an *admissionRecord.
type admissionKey struct{}

// admissionRecord is what WithAdmission puts in a context.
type admissionRecord struct {
	mu sync.Mutex
	a  Admission
}

// add records a, if it is tighter than what is recorded.
func (rec *admissionRecord) add(a Admission) {
	if !a.Decided {
		return
	}
	rec.mu.Lock()
	if !rec.a.Decided || a.Decision.Remaining <= rec.a.Decision.Remaining {
		rec.a = a
	}
	rec.mu.Unlock()
}

func (rec *admissionRecord) get() Admission {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.a
}
