package replay

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
)

func TestReadParsesEveryOp(t *testing.T) {
	in := `{"op":"alloc","id":1,"size":512}
{"op":"alloc","id":2,"size":3000000,"stream":2}
{"op":"free","id":1}
{"op":"empty_cache"}
{"size":7,"op":"alloc","id":1}
{"op":"alloc","id":3,"size":64,"lifetime":"parameter"}
{"op":"alloc","id":4,"size":64,"stream":1,"lifetime":"unknown"}
`
	events, err := Read(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []Event{
		{Op: OpAlloc, ID: 1, Size: 512},
		{Op: OpAlloc, ID: 2, Size: 3000000, Stream: 2},
		{Op: OpFree, ID: 1},
		{Op: OpEmptyCache},
		{Op: OpAlloc, ID: 1, Size: 7},
		{Op: OpAlloc, ID: 3, Size: 64, Lifetime: alloc.LifetimeParameter},
		{Op: OpAlloc, ID: 4, Size: 64, Stream: 1},
	}, events)
}

func TestReadAcceptsMissingFinalNewline(t *testing.T) {
	events, err := Read(strings.NewReader(`{"op":"alloc","id":1,"size":512}`))
	require.NoError(t, err)
	assert.Len(t, events, 1)
}

func TestReadNamesTheBadLine(t *testing.T) {
	ok := `{"op":"alloc","id":1,"size":512}` + "\n"
	cases := map[string]struct{ line, msg string }{
		"not json":            {`{"op":"alloc",`, "not a JSON object"},
		"array":               {`[1,2]`, "not a JSON object"},
		"blank":               {``, "blank line"},
		"no op":               {`{"id":3}`, `missing "op"`},
		"op not string":       {`{"op":1}`, `"op" must be a string`},
		"unknown op":          {`{"op":"malloc","id":3,"size":1}`, `unknown op "malloc"`},
		"upper-case key":      {`{"op":"alloc","ID":3,"size":1}`, `unexpected field "ID"`},
		"size on free":        {`{"op":"free","id":1,"size":512}`, `unexpected field "size"`},
		"id on empty_cache":   {`{"op":"empty_cache","id":1}`, `unexpected field "id"`},
		"alloc without size":  {`{"op":"alloc","id":3}`, `without "size"`},
		"free without id":     {`{"op":"free"}`, `without "id"`},
		"float size":          {`{"op":"alloc","id":3,"size":1.0}`, `"size" must be an integer`},
		"exponent size":       {`{"op":"alloc","id":3,"size":1e3}`, `"size" must be an integer`},
		"string id":           {`{"op":"alloc","id":"3","size":1}`, `"id" must be an integer`},
		"zero size":           {`{"op":"alloc","id":3,"size":0}`, "size must be > 0"},
		"negative id":         {`{"op":"alloc","id":-3,"size":1}`, "id and stream >= 0"},
		"negative stream":     {`{"op":"alloc","id":3,"size":1,"stream":-1}`, "id and stream >= 0"},
		"alloc of live id":    {`{"op":"alloc","id":1,"size":512}`, "id 1, which is still live"},
		"free never alloc'd":  {`{"op":"free","id":9}`, "id 9, which was never allocated"},
		"trailing garbage":    {`{"op":"free","id":1} x`, "not a JSON object"},
		"unknown lifetime":    {`{"op":"alloc","id":3,"size":1,"lifetime":"weights"}`, `"lifetime" must be "unknown", "parameter"`},
		"lifetime as number":  {`{"op":"alloc","id":3,"size":1,"lifetime":1}`, `"lifetime" must be`},
		"lifetime on free":    {`{"op":"free","id":1,"lifetime":"temporary"}`, `unexpected field "lifetime"`},
		"overflowing integer": {`{"op":"alloc","id":3,"size":99999999999999999999}`, `"size" must be an integer`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Read(strings.NewReader(ok + c.line + "\n" + ok))
			var le *LineError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, 2, le.Line)
			assert.Contains(t, le.Msg, c.msg)
			assert.Contains(t, err.Error(), "trace line 2: ")
		})
	}
}

func TestReadRejectsDoubleFree(t *testing.T) {
	in := `{"op":"alloc","id":4,"size":512}
{"op":"free","id":4}
{"op":"free","id":4}
`
	_, err := Read(strings.NewReader(in))
	require.EqualError(t, err, "trace line 3: free of id 4, which is already freed")
}

func TestReadFileNamesPathAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"op":"free","id":1}`+"\n"), 0o644))
	_, err := ReadFile(path)
	require.EqualError(t, err, "trace "+path+" line 1: free of id 1, which was never allocated")

	_, err = ReadFile(filepath.Join(t.TempDir(), "missing.jsonl"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestReadRejectsCorruptGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(`{"op":"alloc","id":1,"size":512}` + "\n"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	b := buf.Bytes()
	b[len(b)-5] ^= 0xff // break the CRC/length trailer
	_, err = Read(bytes.NewReader(b))
	require.Error(t, err)
}

func TestWriteReadRoundTripPlainAndGzip(t *testing.T) {
	events := []Event{
		{Op: OpAlloc, ID: 0, Size: 1},
		{Op: OpAlloc, ID: 1, Size: 1 << 40, Stream: 3},
		{Op: OpEmptyCache},
		{Op: OpFree, ID: 1},
		{Op: OpFree, ID: 0},
		{Op: OpAlloc, ID: 0, Size: 513},
		{Op: OpAlloc, ID: 2, Size: 64, Stream: 1, Lifetime: alloc.LifetimeOptimizerState},
	}
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, events))
	assert.Equal(t, `{"op":"alloc","id":0,"size":1}
{"op":"alloc","id":1,"size":1099511627776,"stream":3}
{"op":"empty_cache"}
{"op":"free","id":1}
{"op":"free","id":0}
{"op":"alloc","id":0,"size":513}
{"op":"alloc","id":2,"size":64,"stream":1,"lifetime":"optimizer_state"}
`, buf.String())

	for _, name := range []string{"t.jsonl", "t.jsonl.gz"} {
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, WriteFile(path, events))
		got, err := ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, events, got, name)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, strings.HasSuffix(name, ".gz"), raw[0] == 0x1f && raw[1] == 0x8b, name)
	}
}

func TestWriteRefusesInvalidTrace(t *testing.T) {
	err := Write(&bytes.Buffer{}, []Event{{Op: OpFree, ID: 2}})
	var le *LineError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, 1, le.Line)

	path := filepath.Join(t.TempDir(), "x.jsonl.gz")
	require.Error(t, WriteFile(path, []Event{{Op: OpAlloc, ID: 1, Size: 0}}))
	require.Error(t, WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir.jsonl"), nil))
}

func TestOpString(t *testing.T) {
	assert.Equal(t, "alloc", OpAlloc.String())
	assert.Equal(t, "free", OpFree.String())
	assert.Equal(t, "empty_cache", OpEmptyCache.String())
	assert.Equal(t, "replay.Op(9)", Op(9).String())
	assert.Equal(t, "replay.Op(0)", Op(0).String())
	require.EqualError(t, Validate([]Event{{Op: Op(0)}}), "trace line 1: unknown op replay.Op(0)")
}

// A gzip stream cut short ends in the middle of a line: the error is the truncation,
// named at that line, not the half line's JSON.
func TestReadReportsTruncatedGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for i := range 2000 {
		_, err := zw.Write(AppendLine(nil, Event{Op: OpAlloc, ID: int64(i), Size: int64(512 + i)}))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	_, err := Read(bytes.NewReader(buf.Bytes()[:buf.Len()/2]))
	var le *LineError
	require.ErrorAs(t, err, &le)
	assert.Positive(t, le.Line)
	assert.Contains(t, le.Msg, "unexpected EOF")
	assert.NotContains(t, le.Msg, "JSON")
}

func TestReadNamesOverlongLine(t *testing.T) {
	in := `{"op":"empty_cache"}` + "\n" + `{"op":"empty_cache"` + strings.Repeat(" ", 1<<20) + "}\n"
	_, err := Read(strings.NewReader(in))
	require.EqualError(t, err, "trace line 2: line longer than 1 MiB")
}
