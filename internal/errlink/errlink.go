// Package errlink lets package cairnqtype's error types fill package
// cairnq's error types of the same names in errors.As. The engine reports
// cairnqtype's errors, and the root package declares its own types with
// the same fields, so that go doc shows them; cairnqtype cannot import the
// root (the root imports the engine, which imports cairnqtype), so the
// root hands its conversion down here when it is initialized.
package errlink

// toRoot is set once, by package cairnq's init, before any error exists
// that could reach it.
var toRoot func(err error, target any) bool

// SetRoot installs the conversion to the root package's error types.
func SetRoot(fn func(err error, target any) bool) { toRoot = fn }

// As fills target, a pointer to a root error pointer, from err when the
// root's type of err's name is what target holds.
func As(err error, target any) bool { return toRoot != nil && toRoot(err, target) }
