package gpu_test

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompareReplayKnowsTheCard runs compare_replay.py (python3, as on the GPU
// machine) on results made here: a run that matches; a run that differs; and a run
// the matrix marks as depending on the card's memory, replayed on a card of another
// size than the oracle's, which is not compared (it cannot match) but said so; and the
// same run on the oracle's card, which is compared.
func TestCompareReplayKnowsTheCard(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	oracle, results := filepath.Join(dir, "oracle"), filepath.Join(dir, "results")
	require.NoError(t, os.MkdirAll(oracle, 0o755))
	require.NoError(t, os.MkdirAll(results, 0o755))
	const h200, h100 = 150109880320, 84929216512
	matrix := map[string]any{"runs": []map[string]any{
		{"name": "same"}, {"name": "differs"}, {"name": "fraction", "alone": true},
	}}
	writeJSON(t, filepath.Join(dir, "matrix.json"), matrix)
	run := func(total int64, last int64) map[string]any {
		return map[string]any{"total_capacity": total, "keys": []string{"event", "allocated"},
			"series": [][]int64{{0, 512}, {1, last}}, "final": map[string]int64{"allocated": last}}
	}
	for _, name := range []string{"same", "differs", "fraction"} {
		writeGzipJSON(t, filepath.Join(oracle, name+".json.gz"), run(h200, 0))
	}
	writeJSON(t, filepath.Join(results, "same.json"), run(h100, 0))
	writeJSON(t, filepath.Join(results, "fraction.json"), run(h100, 1024))
	compare := func(files ...string) (string, error) {
		args := append([]string{"compare_replay.py", "--matrix", filepath.Join(dir, "matrix.json"), oracle}, files...)
		out, err := exec.Command("python3", args...).CombinedOutput()
		return string(out), err
	}

	out, err := compare(filepath.Join(results, "same.json"), filepath.Join(results, "fraction.json"))
	require.NoError(t, err, out)
	assert.Contains(t, out, "same                         2/2 rows equal\n")
	assert.Contains(t, out, "fraction                     not comparable on this card: it depends on the card's memory, 84929216512 bytes here, 150109880320 where the oracle was recorded")
	assert.Contains(t, out, "TOTAL: 1 of 1 runs identical to PyTorch row for row; 2 of 2 rows equal; 1 runs that depend on the card's memory not comparable on this card")

	writeJSON(t, filepath.Join(results, "fraction.json"), run(h200, 1024)) // the oracle's card: compared
	writeJSON(t, filepath.Join(results, "differs.json"), run(h100, 1024))
	out, err = compare(filepath.Join(results, "fraction.json"), filepath.Join(results, "differs.json"))
	require.Error(t, err, out)
	assert.Contains(t, out, "fraction                     1/2 rows equal; first difference at event 1 (line 2): allocated sublet 1024 torch 0")
	assert.Contains(t, out, "differs                      1/2 rows equal")
	assert.Contains(t, out, "TOTAL: 0 of 2 runs identical")

	// An oracle of the H100's own for the card-dependent run: compared with it.
	card := filepath.Join(oracle, "cards", "84929216512")
	require.NoError(t, os.MkdirAll(card, 0o755))
	writeGzipJSON(t, filepath.Join(card, "fraction.json.gz"), run(h100, 1024))
	writeJSON(t, filepath.Join(results, "fraction.json"), run(h100, 1024))
	out, err = compare(filepath.Join(results, "same.json"), filepath.Join(results, "fraction.json"))
	require.NoError(t, err, out)
	assert.Contains(t, out, "fraction                     2/2 rows equal\n")
	assert.Contains(t, out, "TOTAL: 2 of 2 runs identical to PyTorch row for row; 4 of 4 rows equal\n")
	writeJSON(t, filepath.Join(results, "fraction.json"), run(h100, 0))
	out, err = compare(filepath.Join(results, "fraction.json"))
	require.Error(t, err, out)
	assert.Contains(t, out, "fraction                     1/2 rows equal; first difference at event 1 (line 2): allocated sublet 0 torch 1024")
}

func writeJSON(t *testing.T, path string, v any) {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func writeGzipJSON(t *testing.T, path string, v any) {
	f, err := os.Create(path)
	require.NoError(t, err)
	z := gzip.NewWriter(f)
	require.NoError(t, json.NewEncoder(z).Encode(v))
	require.NoError(t, z.Close())
	require.NoError(t, f.Close())
}
