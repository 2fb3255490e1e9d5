// Package examples holds no code of its own: each directory under it is a
// runnable program (package main) showing cairnq in an application, and
// this package's test runs every one of them against a real Postgres, as CI
// does. See README.md.
package examples
