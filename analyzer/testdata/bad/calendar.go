package bad

import "context"

// Quotas has calendar periods gone wrong.
type Quotas interface {
	// want +1 `tz "Mars/Olympus": unknown time zone; want an IANA name such as Europe/Paris or UTC`
	//ratelimit:period=month threshold=1 tz=Mars/Olympus
	Monthly(ctx context.Context) error
	// want +1 `calendar period day is for fixed_window, not gcra`
	//ratelimit:period=day threshold=1 algorithm=gcra
	Daily(ctx context.Context) error
	// want +1 `tz is for a calendar period \(day, week, month, year\), not a period of 1s`
	//ratelimit:period=1 threshold=1 tz=UTC
	Second(ctx context.Context) error
}
