package demo

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryExampleExitsThroughStatus: each example that takes flags turns run's error
// into the exit status with Status in its main, so `-h` exits 0 everywhere and failures
// print one line. (quickstart takes none: its main stays the plain one a reader copies.)
func TestEveryExampleExitsThroughStatus(t *testing.T) {
	mains, err := filepath.Glob("../../*/main.go")
	require.NoError(t, err)
	require.Greater(t, len(mains), 10)
	for _, path := range mains {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		if !importsFlags(f) {
			continue
		}
		found := false
		ast.Inspect(f, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "main" || fn.Recv != nil {
				return true
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "demo" && sel.Sel.Name == "Status" {
						found = true
					}
				}
				return true
			})
			return false
		})
		assert.True(t, found, "%s: main must exit with demo.Status(name, run(...), os.Stderr)", path)
	}
}

// importsFlags reports whether f imports package flag or demo (the example has flags).
func importsFlags(f *ast.File) bool {
	for _, im := range f.Imports {
		if p := im.Path.Value; p == `"flag"` || strings.HasSuffix(p, `/examples/internal/demo"`) {
			return true
		}
	}
	return false
}
