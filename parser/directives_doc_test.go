package parser

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// namesTableMarker is the comment that precedes a table of directive names
// in the docs: one row per name, the name in backquotes in the first cell.
const namesTableMarker = "<!-- directive names:"

// namesTableRow matches a row of such a table and captures the name.
var namesTableRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// documentedNames returns the names of the table that follows
// namesTableMarker in the Markdown file at path, in order. It fails the
// test if the file has no such table.
func documentedNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		names  []string
		marked bool
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !marked {
			marked = strings.HasPrefix(line, namesTableMarker)
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break // the table has ended
		}
		if m := namesTableRow.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("%s has no table of directive names after %q", path, namesTableMarker)
	}
	return names
}

// TestDocsListEveryName: the directive reference (docs/directives.md) and
// the README's summary each list, in a table of their own, exactly the
// names the parser accepts (options), once each and in the parser's
// order, so that a name added to the parser or to the docs alone fails.
func TestDocsListEveryName(t *testing.T) {
	for _, path := range []string{
		filepath.Join("..", "docs", "directives.md"),
		filepath.Join("..", "README.md"),
	} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			documented := documentedNames(t, path)
			for _, name := range optionNames {
				if !slices.Contains(documented, name) {
					t.Errorf("%s: the parser accepts %s=, which the table does not document", path, name)
				}
			}
			for i, name := range documented {
				if _, ok := lookupOption(name); !ok {
					t.Errorf("%s: the table documents %s=, which the parser does not accept", path, name)
				}
				if slices.Contains(documented[:i], name) {
					t.Errorf("%s: the table documents %s= twice", path, name)
				}
			}
			if !t.Failed() && !slices.Equal(documented, optionNames) {
				t.Errorf("%s: the table lists the names in the order\n\t%s\nwant the parser's\n\t%s",
					path, strings.Join(documented, " "), strings.Join(optionNames, " "))
			}
		})
	}
}
