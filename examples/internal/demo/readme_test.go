package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExamplesREADMEListsEveryExample keeps examples/README.md's table whole: every
// example program has its row.
func TestExamplesREADMEListsEveryExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	dirs, err := os.ReadDir("../..")
	require.NoError(t, err)
	n := 0
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "internal" {
			continue
		}
		if _, err := os.Stat(filepath.Join("../..", d.Name(), "main.go")); err != nil {
			continue
		}
		n++
		require.True(t, strings.Contains(string(readme), "| ["+d.Name()+"]("+d.Name()+") |"), "examples/README.md has no row for %s", d.Name())
	}
	require.Greater(t, n, 10)
}
