package model

import "testing"

func TestLowerCamel(t *testing.T) {
	for in, want := range map[string]string{
		"Store": "store", "HTTPClient": "httpClient", "ID": "id", "store": "store", "X": "x", "ÉtéStore": "étéStore",
	} {
		if got := LowerCamel(in); got != want {
			t.Errorf("LowerCamel(%q) = %q, want %q", in, got, want)
		}
	}
}
