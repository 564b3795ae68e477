package docscheck

import (
	"io/fs"
	"path/filepath"
	"strings"
)

// MarkdownFiles returns the documentation the checks read: root's
// README.md and every .md file under root/docs.
func MarkdownFiles(root string) ([]string, error) {
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	return files, err
}
