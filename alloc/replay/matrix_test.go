package replay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCommittedMatrixIsConsistent(t *testing.T) {
	m, err := LoadMatrix("../../testdata/traces/matrix.json")
	require.NoError(t, err)
	used := make(map[string]bool)
	for _, r := range m.Runs {
		used[r.Trace] = true
		assert.NotEmpty(t, r.Why, r.Name)
		if r.Fraction > 0 {
			// allowed bytes must be a real limit, not the whole device
			assert.Less(t, r.Fraction, 0.1, r.Name)
		}
	}
	for _, tr := range m.Traces {
		assert.True(t, used[tr.Name], "trace %s is run with the default config at least", tr.Name)
		var dflt bool
		for _, r := range m.Runs {
			dflt = dflt || (r.Trace == tr.Name && r.Conf == "" && r.Fraction == 0)
		}
		assert.True(t, dflt, "trace %s has a default-config run", tr.Name)
	}
	assert.GreaterOrEqual(t, len(m.Runs), 30)
	assert.LessOrEqual(t, len(m.Runs), 50)
}

func TestLoadMatrixRejects(t *testing.T) {
	const tr = `{"name":"t","kind":"blog","seed":1}`
	cases := map[string]struct{ body, msg string }{
		"not json":        {`{`, "unexpected EOF"},
		"unknown field":   {`{"traces":[],"runs":[],"extra":1}`, `unknown field "extra"`},
		"duplicate trace": {`{"traces":[` + tr + `,` + tr + `]}`, `trace name "t" is a duplicate`},
		"unsafe name":     {`{"traces":[{"name":"a/b","kind":"blog"}]}`, `trace name "a/b"`},
		"unknown kind":    {`{"traces":[{"name":"t","kind":"zzz"}]}`, `unknown kind "zzz"`},
		"unknown trace":   {`{"traces":[` + tr + `],"runs":[{"name":"r","trace":"u"}]}`, `trace "u" is not in`},
		"duplicate run":   {`{"traces":[` + tr + `],"runs":[{"name":"r","trace":"t"},{"name":"r","trace":"t"}]}`, `run name "r" is a duplicate`},
		"bad fraction":    {`{"traces":[` + tr + `],"runs":[{"name":"r","trace":"t","fraction":1.5,"alone":true}]}`, "outside [0, 1]"},
		"fraction shared": {`{"traces":[` + tr + `],"runs":[{"name":"r","trace":"t","fraction":0.5}]}`, `needs "alone": true`},
		"bad conf":        {`{"traces":[` + tr + `],"runs":[{"name":"r","trace":"t","conf":"max_split_size_mb:5"}]}`, "run r: alloc: config \"max_split_size_mb:5\": key max_split_size_mb"},
		"trailing data":   {`{"traces":[],"runs":[]}` + "\n" + `{"traces":[` + tr + `]}`, "data after the matrix object"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "matrix.json")
			require.NoError(t, os.WriteFile(path, []byte(c.body), 0o644))
			_, err := LoadMatrix(path)
			require.ErrorContains(t, err, c.msg)
			assert.ErrorContains(t, err, path)
		})
	}
	_, err := LoadMatrix(filepath.Join(t.TempDir(), "none.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestTracePath(t *testing.T) {
	assert.Equal(t, filepath.Join("a", "b", "x.jsonl.gz"), TracePath(filepath.Join("a", "b", "matrix.json"), "x"))
}
