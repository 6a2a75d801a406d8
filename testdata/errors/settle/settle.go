// Package settle is a diagnostics test of ratelimitgen: settle= reads the
// method's results, which must be there, be named, and be integers.
package settle

import "context"

// Usage is what a call took.
type Usage struct {
	Tokens int
	Model  string
}

func wants(s string) int64 { return 0 }

// S has settle= directives that do not type-check.
type S interface {
	//ratelimit:period=1 threshold=10 settle=n
	OnlyError(ctx context.Context) error
	//ratelimit:period=1 threshold=10 settle=n
	Unnamed(ctx context.Context) (int, error)
	//ratelimit:period=1 threshold=10 settle=count
	Unknown(ctx context.Context) (n int, err error)
	//ratelimit:period=1 threshold=10 settle=u.Model
	NotInteger(ctx context.Context) (u *Usage, err error)
	//ratelimit:period=1 threshold=10 settle=err
	TheError(ctx context.Context) (n int, err error)
	//ratelimit:period=1 threshold=10 settle=ctx
	AParameter(ctx context.Context) (n int, err error)
	//ratelimit:period=1 threshold=10 settle=u.Nope
	NoField(ctx context.Context) (u *Usage, err error)
	//ratelimit:period=1 threshold=10 settle=wants(n)
	WrongArgument(ctx context.Context) (n int, err error)
	//ratelimit:period=1 threshold=10 settle=5
	Number(ctx context.Context) (n int, err error)
	//ratelimit:period=1 threshold=10 settle=n
	//ratelimit:period=1m threshold=100 settle=m
	Disagree(ctx context.Context) (n, m int, err error)
	//ratelimit:period=1 threshold=10 key=user settle=n
	//ratelimit:period=1h threshold=1000
	KeyPerLine(ctx context.Context, user string) (n int, err error)
	//ratelimit:period=1m threshold=100000 cost=tokens
	//ratelimit:period=1m threshold=1000000 cost=bytes
	TwoCosts(ctx context.Context, tokens, bytes int) (n int, err error)
	//ratelimit:period=1m threshold=100000 cost=tokens settle=n
	//ratelimit:period=24h threshold=1000000 cost=tokens
	SettleOnOneLine(ctx context.Context, tokens int) (n int, err error)
	//ratelimit:period=1m threshold=5 refund=sometimes
	RefundWhat(ctx context.Context) error
	//ratelimit:period=1m threshold=5 refund=score(err)
	RefundNotBool(ctx context.Context) error
	//ratelimit:period=1m threshold=5 settle=-1
	SettleNegative(ctx context.Context) error
}

// score is not a bool.
func score(err error) int { return 1 }
