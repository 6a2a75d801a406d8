// Package buildtags is a golden test of ratelimitgen: the decorated types
// are declared in files with build constraints, which the generated file
// must carry too.
package buildtags
