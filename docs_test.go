package sublet_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/tensor"
)

// TestAutocastDocListsTheOpTable keeps docs/autocast.md's list of ops by autocast class
// equal to tensor's op table: an op added or moved to another class fails here with the
// rows to write.
func TestAutocastDocListsTheOpTable(t *testing.T) {
	b, err := os.ReadFile("docs/autocast.md")
	require.NoError(t, err)
	const begin, end = "<!-- autocast classes: begin -->\n", "<!-- autocast classes: end -->"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	require.True(t, i >= 0 && j > i, "docs/autocast.md has the markers around the table")

	byClass := map[tensor.AutocastClass][]string{}
	seen := map[string]bool{}
	for _, o := range tensor.Ops() {
		if !seen[o.Name] { // Gelu and GeluTanh share a name
			seen[o.Name] = true
			byClass[o.Autocast] = append(byClass[o.Autocast], o.Name)
		}
	}
	want := "| class | ops |\n|---|---|\n"
	for _, c := range []tensor.AutocastClass{tensor.AutocastLower, tensor.AutocastF32, tensor.AutocastF32Out, tensor.AutocastBanned, tensor.AutocastNone} {
		want += "| " + c.String() + " | " + strings.Join(byClass[c], ", ") + " |\n"
		delete(byClass, c)
	}
	assert.Empty(t, byClass, "a class the doc does not describe: add it to docs/autocast.md's tables")
	assert.Equal(t, want, doc[i+len(begin):j], "docs/autocast.md's table between the markers must be this")
}

// goFiles lists the repository's Go files.
func goFiles(t *testing.T) []string {
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// TestNoCitationsOutsideTheRepository: the reference texts the project was built from
// (spec/*.md) are not in the repository, so the code points to docs/ instead.
func TestNoCitationsOutsideTheRepository(t *testing.T) {
	cite := regexp.MustCompile(`spec/[a-z-]+\.md|spec §`)
	for _, f := range goFiles(t) {
		if f == "docs_test.go" { // this test, which names what it looks for
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for n, line := range strings.Split(string(b), "\n") {
			if cite.MatchString(line) {
				t.Errorf("%s:%d cites a text outside the repository; point to docs/ instead: %s", f, n+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestDocsPointersExist: every docs/NAME.md that a Go file names is in the repository.
func TestDocsPointersExist(t *testing.T) {
	ref := regexp.MustCompile(`docs/[a-z0-9-]+\.md`)
	for _, f := range goFiles(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range ref.FindAllString(string(b), -1) {
			_, err := os.Stat(m)
			assert.NoError(t, err, "%s names %s", f, m)
		}
	}
}
