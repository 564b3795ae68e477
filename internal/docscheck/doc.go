// Package docscheck holds the tests that keep the documentation whole:
// every relative link and image in README.md and the Markdown files under
// docs/ names a file or directory of the repository, and every #fragment
// names a heading of the file it points to; a document that lists the
// fields of a command's JSON output names every field its Go type has
// (read from source, not imported); docs/architecture.md's layout names
// every directory of pkg/ and internal/. Its only code lists those files
// (MarkdownFiles); it sits outside the layers and imports none of them.
// Its subpackage snippets keeps the Go snippets of the same files
// compiling.
package docscheck
