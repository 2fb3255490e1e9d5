// Package examples holds no code of its own: each directory under it is a
// runnable program (package main) showing cairnq in an application, and
// this package's test runs every one of them against a real Postgres, as CI
// does. Its tests also run the Postgres examples the repository's README
// quotes (readme_test.go). See README.md.
package examples
