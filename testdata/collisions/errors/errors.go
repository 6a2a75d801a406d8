// Package errors is a helper of the collisions golden test: a package whose
// name collides with the standard library's errors.
package errors

// Code is an error code with a String method.
type Code int

// String returns the code in decimal with a prefix.
func (c Code) String() string { return "E" + string(rune('0'+c%10)) }
