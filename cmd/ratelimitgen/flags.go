package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// options are the parsed command line.
type options struct {
	dir      string   // directory to run in (-C), "" for the current one
	output   string   // file name of the generated file in each package directory
	tags     []string // extra build tags
	check    bool
	list     bool
	json     bool
	patterns []string
}

const usageLine = "usage: ratelimitgen [-C dir] [-output file] [-tags list] [-check] [-list [-json]] [packages]"

// parseFlags parses args. On failure or -help it returns nil and the exit
// code, having printed the problem and the usage to stderr.
func parseFlags(args []string, stderr io.Writer) (*options, int) {
	var o options
	var tags string
	fs := flag.NewFlagSet("ratelimitgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dir, "C", "", "change to `dir` before doing anything")
	fs.StringVar(&o.output, "output", "ratelimit_gen.go", "file `name` of the generated file in each package directory")
	fs.StringVar(&tags, "tags", "", "comma-separated build tags to load the packages with")
	fs.BoolVar(&o.check, "check", false, "write nothing; print a diff of every stale generated file and exit 1 if any")
	fs.BoolVar(&o.list, "list", false, "write nothing; print every limit found")
	fs.BoolVar(&o.json, "json", false, "with -list, print JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, usageLine)
		fmt.Fprintln(stderr, "\nGenerates rate-limiting decorators from //ratelimit: directives; see go doc github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK
		}
		return nil, exitUsage
	}
	if err := o.validate(tags); err != nil {
		fmt.Fprintf(stderr, "ratelimitgen: %v\n%s\n", err, usageLine)
		return nil, exitUsage
	}
	o.patterns = fs.Args()
	if len(o.patterns) == 0 {
		o.patterns = []string{"."}
	}
	return &o, exitOK
}

func (o *options) validate(tags string) error {
	switch {
	case o.output == "" || o.output != filepath.Base(o.output) || o.output == "." || o.output == "..":
		return fmt.Errorf("-output %q must be a file name without a directory: it is written in each package's directory", o.output)
	case !strings.HasSuffix(o.output, ".go") || strings.HasSuffix(o.output, "_test.go"):
		return fmt.Errorf("-output %q must name a .go file that is not a test file", o.output)
	case o.check && o.list:
		return errors.New("-check and -list cannot be used together")
	case o.json && !o.list:
		return errors.New("-json needs -list")
	}
	for _, t := range strings.Split(tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.tags = append(o.tags, t)
		}
	}
	return nil
}
