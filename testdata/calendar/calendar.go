// Package calendar is a golden test of ratelimitgen: quotas over calendar
// periods, which start at midnight in their zone.
package calendar

import "context"

// Quotas has a limit per calendar period.
type Quotas interface {
	// Monthly admits 10,000 calls per API key each month, from midnight
	// of the 1st in Paris.
	//ratelimit:period=month threshold=10000 tz=Europe/Paris key=apiKey
	Monthly(ctx context.Context, apiKey string) error
	// Daily admits 3 calls a day (UTC), and 2 a second.
	//ratelimit:period=day threshold=3 algorithm=fixed_window
	//ratelimit:period=1 threshold=2
	Daily(ctx context.Context) error
	// Weekly admits 5 calls a week, from Monday in New York.
	//ratelimit:period=week threshold=5 tz=America/New_York
	Weekly(ctx context.Context) error
	// Yearly admits 2 calls a year in Tokyo.
	//ratelimit:period=year threshold=2 tz=Asia/Tokyo
	Yearly(ctx context.Context) error
	// Tokens reserves maxTokens of a key's 1,000 tokens a month in Paris,
	// and settles at the tokens the call used.
	//ratelimit:period=month threshold=1000 tz=Europe/Paris key=apiKey cost=maxTokens settle=used
	Tokens(ctx context.Context, apiKey string, maxTokens int64) (used int64, err error)
}
