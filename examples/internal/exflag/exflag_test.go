package exflag

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 0, "")
	require.NoError(t, Parse(fs, []string{"-n", "3"}))
	assert.Equal(t, 3, *n)
	assert.EqualError(t, Parse(fs, []string{"-n", "3", "extra"}), `unexpected arguments ["extra"]`)
	assert.Error(t, Parse(fs, []string{"-nope"}))
}

func TestStatus(t *testing.T) {
	var b strings.Builder
	assert.Equal(t, 0, Status("x", nil, &b))
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	err := Parse(fs, []string{"-h"})
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Equal(t, 0, Status("x", err, &b), "-h is no failure")
	assert.Empty(t, b.String())
	assert.Equal(t, 1, Status("x", fmt.Errorf("-device: %w", errors.New("unknown device")), &b))
	assert.Equal(t, "x: -device: unknown device\n", b.String())
}

// TestEveryExampleExitsThroughStatus: each example that takes flags turns run's error
// into the exit status with Status in its main, so `-h` exits 0 everywhere and failures
// print one line. (quickstart takes none: its main stays the plain one a reader copies.)
func TestEveryExampleExitsThroughStatus(t *testing.T) {
	mains, err := filepath.Glob("../../*/main.go")
	require.NoError(t, err)
	require.NotEmpty(t, mains)
	for _, path := range mains {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		if !importsFlag(f) {
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
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "exflag" && sel.Sel.Name == "Status" {
						found = true
					}
				}
				return true
			})
			return false
		})
		assert.True(t, found, "%s: main must exit with exflag.Status(name, run(...), os.Stderr)", path)
	}
}

// importsFlag reports whether f imports package flag or exflag (the example has flags).
func importsFlag(f *ast.File) bool {
	for _, im := range f.Imports {
		if p := im.Path.Value; p == `"flag"` || strings.HasSuffix(p, `/exflag"`) {
			return true
		}
	}
	return false
}
