package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/internal/jsonkeys"
)

// Every JSON the commands print or write has snake_case keys, PyTorch's convention for
// its memory_stats() keys (which they carry): replay (with -series), trace info, the
// settings info prints, and the JSON snapshot. The one other key is SUBLET_ALLOC_CONF,
// the variable's own name, where PyTorch's allocator_settings has
// PYTORCH_CUDA_ALLOC_CONF.
func TestJSONKeysAreSnakeCase(t *testing.T) {
	t.Setenv(alloc.ConfigEnv, "")
	trace := "../../testdata/traces/blog.jsonl.gz"
	snap := filepath.Join(t.TempDir(), "snap.json")
	outputs := map[string]string{}
	for name, args := range map[string][]string{
		"replay":     {"replay", "-trace", trace, "-series"},
		"trace info": {"trace", "info", "-trace", trace},
		"info":       {"info"},
		"snapshot":   {"snapshot", "-trace", trace, "-o", snap},
	} {
		code, out, errs := sublet(args...)
		require.Equal(t, 0, code, "%s: %s", name, errs)
		outputs[name] = out
	}
	info := outputs["info"]
	i := strings.Index(info, "\n{")
	require.GreaterOrEqual(t, i, 0, "info prints its settings as a JSON object: %s", info)
	var settings json.RawMessage
	require.NoError(t, json.NewDecoder(strings.NewReader(info[i:])).Decode(&settings))
	outputs["info"] = string(settings)
	b, err := os.ReadFile(snap)
	require.NoError(t, err)
	outputs["snapshot"] = string(b)

	for name, out := range outputs {
		bad, err := jsonkeys.Bad([]byte(out), alloc.ConfigEnv)
		require.NoError(t, err, name)
		assert.Empty(t, bad, "%s: keys that are not snake_case", name)
	}
}
