// Package templates renders the model of the code ratelimitgen generates
// (package model) with github.com/dave/jennifer: the emit stage.
//
// The check stage loads and checks a package, then describes what to
// generate as a [model.File]: the package's decorated types, each with its
// methods and, for limited methods, the compiled [model.Rule] (limits,
// key, cost, context). [Render] turns it into gofmt'd Go source.
//
// Naming is decided here, but for the fixed names of decorators and their
// constructors (exported or chosen with decorator=) and of the function
// that returns the package's rules (model.RulesFunc), which the check
// stage has made sure are free: imports get the package's real name
// unless it is taken (by a declaration of the user's package, by a fixed
// name, by another import, or by a predeclared identifier the generated
// code uses), in which case they get a numbered alias; the
// other package-level names (unexported decorators and constructors, rule
// variables) avoid everything in the package scope; and each method
// allocates its parameters and locals so that none of them shadows an
// identifier its body refers to.
package templates
