package check

import (
	"strings"
	"testing"
)

func TestBuildTagsCombineGOFLAGS(t *testing.T) {
	for _, tc := range []struct {
		goflags string
		extra   []string
		want    string
	}{
		{"", nil, "ratelimitgen"},
		{"-tags=a,b -mod=mod", []string{"c"}, "a,b,c,ratelimitgen"},
		{"--tags=a", []string{"a"}, "a,ratelimitgen"},
		{"-tags=ratelimitgen", nil, "ratelimitgen"},
	} {
		if got := strings.Join(buildTags(tc.goflags, tc.extra), ","); got != tc.want {
			t.Errorf("buildTags(%q, %q) = %q, want %q", tc.goflags, tc.extra, got, tc.want)
		}
	}
}
