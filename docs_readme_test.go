package sublet_test

import (
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxPackageDocWords bounds a package doc, which go doc prints before the package's
// index: a design rationale belongs in docs/.
const maxPackageDocWords = 1200

// Every package doc is short enough to read before the index and has each heading
// once.
func TestPackageDocsAreReadable(t *testing.T) {
	for _, f := range goFiles(t) {
		if strings.HasSuffix(f, "_test.go") || strings.Contains(f, "_doccheck") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments|parser.PackageClauseOnly)
		require.NoError(t, err)
		if pf.Doc == nil {
			continue
		}
		text := pf.Doc.Text()
		words := len(strings.Fields(text))
		assert.LessOrEqual(t, words, maxPackageDocWords, "%s: a package doc of %d words; move the rationale to docs/", f, words)
		seen := map[string]bool{}
		for _, b := range new(comment.Parser).Parse(text).Content {
			h, ok := b.(*comment.Heading)
			if !ok {
				continue
			}
			var title strings.Builder
			for _, x := range h.Text {
				if p, ok := x.(comment.Plain); ok {
					title.WriteString(string(p))
				}
			}
			assert.False(t, seen[title.String()], "%s: heading %q twice", f, title.String())
			seen[title.String()] = true
		}
	}
}

// The documentation names no path outside the repository (a reader of a clone has
// none of them), and README.md and examples/README.md are in English.
func TestDocsStayInTheRepository(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	files = append(files, "README.md", "examples/README.md")
	rel := regexp.MustCompile(`(?:\.\./)+[\w./-]*`)
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range rel.FindAllString(string(b), -1) {
			if f == "README.md" && m == "../sublet" {
				continue // the install section: the checkout as the user's module sees it
			}
			p, err := filepath.Abs(filepath.Join(filepath.Dir(f), m))
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(p, root+string(filepath.Separator)) || p == root, "%s names %s, outside the repository", f, m)
		}
		if f == "README.md" || f == "examples/README.md" {
			for _, r := range string(b) {
				if unicode.Is(unicode.Han, r) {
					t.Errorf("%s holds %q: write it in English", f, r)
					break
				}
			}
		}
	}
}

// README's way to use a checkout before sublet is published works: the go mod edit
// line it gives, then a build of a program importing sublet (offline: the go.sum of
// this checkout stands in for go mod tidy's download).
func TestReadmeCheckoutInstallWorks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	const edit = "go mod edit -require=github.com/subletml/sublet@v0.0.0 -replace=github.com/subletml/sublet=../sublet"
	require.Contains(t, string(readme), "\n    "+edit+"\n    go mod tidy\n")

	root, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	run := func(args ...string) string {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	run("mod", "init", "example.com/user")
	run(strings.Fields(strings.Replace(edit, "=../sublet", "="+root, 1))[1:]...)
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(`package main

import (
	"fmt"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func main() {
	dev, err := cpu.New(cpu.Options{})
	if err != nil {
		panic(err)
	}
	s := tensor.NewScope()
	defer s.Close()
	fmt.Println(tensor.FromSlice(s, dev, dtype.F32, []float32{1, 2, 3}).Sum().Item())
}
`), 0o644))
	assert.Equal(t, "6\n", run("run", "."))
}
