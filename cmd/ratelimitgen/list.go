package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"go/token"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/model"
)

// listRow is one limit of one method, as printed by -list.
type listRow struct {
	pos       token.Position
	Position  string `json:"position"`
	Package   string `json:"package"`
	Type      string `json:"type"`
	Method    string `json:"method"`
	Name      string `json:"name"`
	Period    string `json:"period"`
	TZ        string `json:"tz,omitempty"`
	Threshold int64  `json:"threshold"`
	Key       string `json:"key,omitempty"`
	Cost      string `json:"cost,omitempty"`
	Settle    string `json:"settle,omitempty"`
	Refund    string `json:"refund,omitempty"`
	Algorithm string `json:"algorithm"`
	Burst     int64  `json:"burst,omitempty"`
	Capacity  int64  `json:"capacity,omitempty"`
	Wait      string `json:"wait,omitempty"`
	OnError   string `json:"onerror,omitempty"`
	Shadow    bool   `json:"shadow,omitempty"`
	EmptyKey  string `json:"emptykey,omitempty"`
	KeyHash   bool   `json:"keyhash,omitempty"`
	Cooldown  bool   `json:"cooldown,omitempty"`
	// Shared is the name of the shared line the limit is, whose state
	// belongs to that name rather than to Name; empty for a method's own.
	Shared string `json:"shared,omitempty"`
}

// listRows returns one row per limit of every limited method of files.
func listRows(files []*model.File) []listRow {
	var rows []listRow
	for _, f := range files {
		for _, d := range f.Decorators {
			for _, m := range d.Methods {
				if m.Rule != nil {
					rows = append(rows, methodRows(f.PkgPath, d.Type.Obj().Name(), m)...)
				}
			}
		}
	}
	return rows
}

// methodRows returns one row per limit of a limited method.
func methodRows(pkgPath, typeName string, m *model.Method) []listRow {
	rule := m.Rule
	rows := make([]listRow, len(rule.Limits))
	for i, l := range rule.Limits {
		row := listRow{
			pos: l.Pos, Package: pkgPath, Type: typeName, Method: m.Name, Name: rule.Name,
			Period: cmp.Or(l.Calendar, compactDuration(l.Period)), TZ: l.TZ, Threshold: l.Threshold, Algorithm: cmp.Or(l.Algorithm, limitfacts.Default),
			Burst: l.Burst, Capacity: l.Capacity, OnError: rule.OnError, Shadow: rule.Shadow,
		}
		row.Shared, row.Cooldown = l.Shared, l.Cooldown
		if l.Key != nil {
			row.Key = l.Key.Source
			row.KeyHash = l.Key.Hash
			if l.Key.DenyEmpty {
				row.EmptyKey = "deny"
			}
		}
		switch {
		case l.PerCall || l.Algorithm == limitfacts.Concurrency:
			// 1 per call (a concurrency line holds a slot per call)
		case rule.CostValue != nil:
			row.Cost = rule.CostValue.Source
		case rule.Cost != 0:
			row.Cost = strconv.FormatInt(rule.Cost, 10)
		}
		if !l.PerCall && l.Algorithm != limitfacts.Concurrency {
			row.Settle = settleOf(rule)
		}
		row.Refund = rule.Refund
		if rule.RefundValue != nil {
			row.Refund = rule.RefundValue.Source
		}
		if rule.Wait != 0 {
			row.Wait = compactDuration(rule.Wait)
		}
		rows[i] = row
	}
	return rows
}

// settleOf writes rule's settle= as its directive does: an expression of
// the results or a fixed cost; "" without one.
func settleOf(rule *model.Rule) string {
	switch {
	case rule.Settle != nil:
		return rule.Settle.Source
	case rule.SettleUnits != nil:
		return strconv.FormatInt(*rule.SettleUnits, 10)
	}
	return ""
}

// printList prints the rows sorted by position, as an aligned table or as
// JSON.
func printList(w io.Writer, rows []listRow, asJSON bool, rel func(string) string) error {
	slices.SortFunc(rows, func(a, b listRow) int {
		return cmp.Or(cmp.Compare(a.pos.Filename, b.pos.Filename), cmp.Compare(a.pos.Line, b.pos.Line),
			cmp.Compare(a.pos.Column, b.pos.Column), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Method, b.Method))
	})
	for i := range rows {
		p := rows[i].pos
		p.Filename = rel(p.Filename)
		rows[i].Position = p.String()
	}
	if asJSON {
		if rows == nil {
			rows = []listRow{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POSITION\tMETHOD\tNAME\tPERIOD\tTHRESHOLD\tKEY\tCOST\tALGORITHM\tOPTIONS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s.%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Position, r.Type, r.Method, r.Name, r.Period, r.Threshold,
			cmp.Or(r.Key, "-"), cmp.Or(r.Cost, "1"), r.Algorithm, cmp.Or(r.options(), "-"))
	}
	return tw.Flush()
}

// options writes the limit's other options as directives do:
// burst=20 wait=1s onerror=deny.
func (r *listRow) options() string {
	var opts []string
	add := func(name, value string) {
		if value != "" {
			opts = append(opts, name+"="+value)
		}
	}
	add("tz", r.TZ)
	add("settle", r.Settle)
	add("refund", r.Refund)
	if r.Burst != 0 {
		add("burst", strconv.FormatInt(r.Burst, 10))
	}
	if r.Capacity != 0 {
		add("capacity", strconv.FormatInt(r.Capacity, 10))
	}
	add("wait", r.Wait)
	add("onerror", r.OnError)
	if r.Shadow {
		add("shadow", "true")
	}
	add("emptykey", r.EmptyKey)
	if r.KeyHash {
		add("keyhash", "true")
	}
	add("shared", r.Shared)
	if r.Cooldown {
		add("cooldown", "true")
	}
	return strings.Join(opts, " ")
}

// compactDuration writes d without zero trailing units: 1m, 1h30m, 500ms.
func compactDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
