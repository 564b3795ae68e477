// Package snippets holds the test that keeps the Go snippets of README.md
// and the Markdown files under docs/ compiling: each snippet is also the
// body of a function in this package's test file, which the compiler
// checks, and the test checks that every snippet reads, token for token,
// as one of those functions. Like internal/docscheck it has no code of
// its own; its test imports the packages the snippets use.
package snippets
