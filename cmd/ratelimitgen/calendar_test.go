package main

import (
	"encoding/json"
	"testing"
)

// TestListShowsCalendarPeriods: -list shows a calendar period as its
// PERIOD and its zone among the options; -list -json as period and tz.
func TestListShowsCalendarPeriods(t *testing.T) {
	dir := testdataDir(t, "calendar")
	code, stdout, stderr := cli(t, "-C", dir, "-list")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := `POSITION          METHOD          NAME                                                                   PERIOD  THRESHOLD  KEY     COST       ALGORITHM     OPTIONS
calendar.go:11:2  Quotas.Monthly  github.com/ratelimitgen/ratelimitgen/testdata/calendar.Quotas.Monthly  month   10000      apiKey  1          fixed_window  tz=Europe/Paris
calendar.go:14:2  Quotas.Daily    github.com/ratelimitgen/ratelimitgen/testdata/calendar.Quotas.Daily    day     3          -       1          fixed_window  -
calendar.go:15:2  Quotas.Daily    github.com/ratelimitgen/ratelimitgen/testdata/calendar.Quotas.Daily    1s      2          -       1          sliding_log   -
calendar.go:18:2  Quotas.Weekly   github.com/ratelimitgen/ratelimitgen/testdata/calendar.Quotas.Weekly   week    5          -       1          fixed_window  tz=America/New_York
calendar.go:21:2  Quotas.Yearly   github.com/ratelimitgen/ratelimitgen/testdata/calendar.Quotas.Yearly   year    2          -       1          fixed_window  tz=Asia/Tokyo
calendar.go:25:2  Quotas.Tokens   github.com/ratelimitgen/ratelimitgen/testdata/calendar.Quotas.Tokens   month   1000       apiKey  maxTokens  fixed_window  tz=Europe/Paris settle=used
`
	if stdout != want {
		t.Errorf("-list printed\n%s\nwant\n%s", stdout, want)
	}
	code, stdout, _ = cli(t, "-C", dir, "-list", "-json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(stdout), &rows); code != exitOK || err != nil || len(rows) != 6 {
		t.Fatalf("-list -json: exit %d, %v\n%s", code, err, stdout)
	}
	if rows[0]["period"] != "month" || rows[0]["tz"] != "Europe/Paris" || rows[0]["algorithm"] != "fixed_window" {
		t.Errorf("-list -json: %v", rows[0])
	}
	if _, ok := rows[1]["tz"]; ok {
		t.Errorf("-list -json: a UTC day has no tz: %v", rows[1])
	}
}
