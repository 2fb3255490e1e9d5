// Package conformance holds the cairnq conformance machinery for the Go SDK.
//
// It contains an interpreter for the language-neutral scenario format (JSON
// files of steps and assertions that pin cairnq's behaviour), which drives any
// implementation through the small Target interface, and this module's own
// scenarios in the scenarios directory. It will later also hold the executor
// certification suite, which runs the scenarios against a candidate
// implementation through RunE.
//
// A scenario is a named list of steps. A step runs one op with args, may save
// its result under an alias, and may assert on it inline ("expect") or assert
// that it fails ("expectError"). Strings of the form "$alias", "$alias.field"
// or "$alias.0.field" anywhere in args or expectations are replaced by saved
// values before use. A step with op "expect" runs nothing and asserts on its
// "target". The op "sleep" ({"ms": n}) is handled by the interpreter itself;
// every other op goes to the Target.
package conformance
