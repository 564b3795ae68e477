// Package docscheck holds the test that keeps the documentation whole:
// every relative link and image in README.md and the Markdown files under
// docs/ names a file or directory of the repository, and every #fragment
// names a heading of the file it points to. Its only code lists those
// files (MarkdownFiles); it sits outside the layers and imports none of
// them.
// Its subpackage snippets keeps the Go snippets of the same files
// compiling.
package docscheck
