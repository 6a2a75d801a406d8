package parser

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"period", "period", 0},
		{"perod", "period", 1},
		{"threshhold", "threshold", 1},
		{"thershold", "threshold", 1}, // transposition
		{"kitten", "sitting", 3},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, editDistance(tt.a, tt.b), "%q %q", tt.a, tt.b)
	}
}

func TestSuggest(t *testing.T) {
	tests := map[string]string{
		"threshhold":  "threshold",
		"treshold":    "threshold",
		"thresh":      "threshold",
		"perod":       "period",
		"Period":      "period",
		"keys":        "key",
		"onError":     "onerror",
		"on_error":    "onerror",
		"capcity":     "capacity",
		"algo":        "",
		"rate":        "",
		"x":           "",
		"":            "",
		"tokenbucket": "", // not an option name
	}
	for in, want := range tests {
		assert.Equal(t, want, suggest(in, optionNames), "%q", in)
	}
	assert.Equal(t, "token_bucket", suggest("tokenbucket", Algorithms))
	assert.Equal(t, "leaky_bucket", suggest("leaky-bucket", Algorithms))
	assert.Equal(t, "", suggest(strings.Repeat("period", 1000), optionNames))
}
