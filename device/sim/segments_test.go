package sim

import (
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

var recording = []Segment{
	{Size: 20 << 20, Addr: ptr(0x7f3a_0000_0000)},
	{Size: 2 << 20, Addr: ptr(0x7f3a_0140_0000)},
	{Size: 20 << 20, Addr: ptr(0x7f39_fe00_0000)},
	{Size: 20 << 20, Addr: ptr(0x7f3a_0000_0000)},
}

func TestRecordedSegmentsReplay(t *testing.T) {
	d := newSim(t, Options{Segments: recording})
	a, err := d.Malloc(20 << 20)
	require.NoError(t, err)
	assert.Equal(t, recording[0].Addr, a)

	_, err = d.Malloc(4 << 20)
	require.Error(t, err)
	assert.False(t, errors.Is(err, device.ErrOutOfMemory), "a divergence is not OOM")
	assert.Contains(t, err.Error(), "Malloc of 4194304 bytes asks for segment index 1, which was recorded with 2097152 bytes")

	b, err := d.Malloc(2 << 20)
	require.NoError(t, err, "a refused Malloc uses up no recorded segment")
	assert.Equal(t, recording[1].Addr, b)
	c, err := d.Malloc(20 << 20)
	require.NoError(t, err)
	assert.Equal(t, recording[2].Addr, c)

	_, err = d.Malloc(20 << 20)
	require.Error(t, err, "segment 3 reuses segment 0's address, still live")
	require.NoError(t, d.Free(a))
	a, err = d.Malloc(20 << 20)
	require.NoError(t, err, "the driver reused a freed address")
	assert.Equal(t, recording[3].Addr, a)

	_, err = d.Malloc(2 << 20)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "asks for segment index 4, but only 4 segments were recorded")
	for _, p := range []device.Ptr{a, b, c} {
		require.NoError(t, d.Free(p))
	}
	assert.Equal(t, int64(0), d.Stats().InUse)
}

func TestRecordedSegmentsAndFaults(t *testing.T) {
	d := newSim(t, Options{Segments: recording[:2], Faults: Faults{Nth: 1}})
	_, err := d.Malloc(20 << 20)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	a, err := d.Malloc(20 << 20)
	require.NoError(t, err, "an injected failure uses up no recorded segment, as a failed cudaMalloc records none")
	assert.Equal(t, recording[0].Addr, a)
	require.NoError(t, d.Free(a))
}

func writeFile(t *testing.T, name string, data []byte, gz bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	if gz {
		zw := gzip.NewWriter(f)
		_, err = zw.Write(data)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
	} else {
		_, err = f.Write(data)
		require.NoError(t, err)
	}
	return path
}

func TestLoadSegments(t *testing.T) {
	need64(t)
	array := `[{"size": 20971520, "addr": 139887095234560}, {"size": 2097152, "addr": 139887116206080}]`
	want := []Segment{{20971520, ptr(139887095234560)}, {2097152, ptr(139887116206080)}}
	result := `{"trace": "x.jsonl", "total_capacity": 150109880320, "segments": ` + array + `, "series": [[1, 2]]}`
	for name, path := range map[string]string{
		"array":          writeFile(t, "segs.json", []byte(array), false),
		"result":         writeFile(t, "res.json", []byte(result), false),
		"gzipped result": writeFile(t, "res.json.gz", []byte(result), true),
		"gzipped array":  writeFile(t, "segs.json.gz", []byte("\n  "+array), true),
	} {
		got, err := LoadSegments(path)
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}
	empty, err := LoadSegments(writeFile(t, "e.json", []byte(`{"segments": []}`), false))
	require.NoError(t, err)
	assert.Empty(t, empty)

	for name, c := range map[string]struct{ data, msg string }{
		"no segments field": {`{"series": []}`, `no "segments" field`},
		"bad json":          {`[{"size": 1,`, "unexpected end"},
		"unaligned address": {`[{"size": 2097152, "addr": 4096}, {"size": 2097152, "addr": 4097}]`, "segment index 1"},
		"zero size":         {`[{"size": 0, "addr": 4096}]`, "segment index 0"},
	} {
		_, err := LoadSegments(writeFile(t, "bad.json", []byte(c.data), false))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.msg, name)
	}
	_, err = LoadSegments(filepath.Join(t.TempDir(), "missing.json"))
	require.Error(t, err)
}
