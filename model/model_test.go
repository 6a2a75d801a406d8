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

// TestSharedKey: a rule whose lines all have the same key, or none, is
// checked under one key; one whose lines differ has its distinct keys in
// the order of their first line.
func TestSharedKey(t *testing.T) {
	user, tenant := &Key{Value: Value{Source: "user"}}, &Key{Value: Value{Source: "tenant"}}
	for _, c := range []struct {
		keys   []*Key
		shared bool
		want   *Key
	}{
		{[]*Key{nil}, true, nil},
		{[]*Key{user}, true, user},
		{[]*Key{nil, nil}, true, nil},
		{[]*Key{user, user}, true, user},
		{[]*Key{user, nil}, false, nil},
		{[]*Key{nil, tenant, user, tenant}, false, nil},
	} {
		r := &Rule{}
		for _, k := range c.keys {
			r.Limits = append(r.Limits, Limit{Key: k})
		}
		if got, shared := r.SharedKey(); shared != c.shared || got != c.want {
			t.Errorf("%v: SharedKey() = %v, %v; want %v, %v", c.keys, got, shared, c.want, c.shared)
		}
	}
	r := &Rule{Limits: []Limit{{}, {Key: tenant}, {Key: user}, {Key: tenant}}}
	if got := r.Keys(); len(got) != 2 || got[0] != tenant || got[1] != user {
		t.Errorf("Keys() = %v, want [tenant user]", got)
	}
}
