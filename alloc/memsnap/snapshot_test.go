package memsnap

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// handMade is a snapshot with every kind of value: two segments, a shared stack, an
// oom, an address above 2^32 and a negative max_split_size.
func handMade() *Snapshot {
	stack := []alloc.Frame{{Name: "main.step", Filename: "/src/train.go", Line: 42}, {Name: "main.main", Filename: "/src/train.go", Line: 9}}
	return &Snapshot{
		Segments: []Segment{
			{Address: 0x7f0000000000, TotalSize: 2 << 20, AllocatedSize: 1024, ActiveSize: 1024, RequestedSize: 1000, SegmentType: "small",
				Blocks: []Block{
					{Address: 0x7f0000000000, Size: 1024, RequestedSize: 1000, State: "active_allocated", Frames: stack, Op: "MatMul", Scope: "layer1"},
					{Address: 0x7f0000000400, Size: 2<<20 - 1024, State: "inactive"},
				}},
			{Address: 0x7f0000200000, TotalSize: 20 << 20, Stream: 7, SegmentType: "large", IsExpandable: true,
				Blocks: []Block{{Address: 0x7f0000200000, Size: 20 << 20, State: "inactive"}}},
		},
		DeviceTraces: [][]TraceEntry{{
			{Action: "segment_alloc", Addr: 0x7f0000000000, Size: 2 << 20, BlockSize: 2 << 20, TimeUs: 1700000000000001, Frames: stack},
			{Action: "alloc", Addr: 0x7f0000000000, Size: 1000, BlockSize: 1024, TimeUs: 1700000000000002, Frames: stack, Op: "MatMul", Scope: "layer1"},
			{Action: "oom", Size: 1 << 40, DeviceFree: 123456789, Stream: 7, TimeUs: 1700000000000003},
			{Action: "empty_cache", TimeUs: 1700000000000004},
		}},
		Settings: &Settings{MaxSplitSize: -1, GarbageCollectionThreshold: 0.5, RoundupPower2Divisions: []int64{0, 4, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		Devices:  []Device{{Name: "sim:0", DeviceFree: 1 << 30, DeviceTotal: 2 << 30, Dropped: 3, Stats: map[string]int64{"num_ooms": 1, "allocated_bytes.all.current": 1024}}},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to write it")
	assert.Equal(t, string(want), string(got), "%s differs: go test -update rewrites it", path)
}

func TestGoldenJSONAndPickle(t *testing.T) {
	s := handMade()
	var j, p bytes.Buffer
	require.NoError(t, WriteJSON(&j, s))
	require.NoError(t, WritePickle(&p, s))
	golden(t, "handmade.json", j.Bytes())
	golden(t, "handmade.pickle", p.Bytes())

	for name, b := range map[string][]byte{"json": j.Bytes(), "pickle": p.Bytes()} {
		got, err := Read(bytes.NewReader(b))
		require.NoError(t, err, name)
		assert.Equal(t, s, got, "%s round trip", name)
	}
}

// sampled records a small workload with history on and returns its snapshot.
func sampled(t *testing.T) *Snapshot {
	t.Helper()
	d, err := sim.New(sim.Options{Capacity: 1 << 30, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	require.NoError(t, a.RecordHistory(alloc.HistoryOptions{Trace: true}))
	var ps []uint64
	for i := range 4 {
		p, err := a.AllocTagged(int64(i+1)<<20, 0, alloc.Tag{Op: "Add"})
		require.NoError(t, err)
		ps = append(ps, uint64(p))
	}
	_, err = a.Alloc(2<<30, 0)
	require.Error(t, err)
	s := From(a.MemorySnapshot())
	require.Len(t, s.DeviceTraces, 1)
	for _, p := range ps {
		require.NoError(t, a.Free(devicePtr(p)))
	}
	require.NoError(t, a.EmptyCache())
	require.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
	return s
}

func TestRoundTripOfARecording(t *testing.T) {
	s := sampled(t)
	assert.Equal(t, []string{"segment_alloc", "alloc", "segment_alloc", "alloc", "alloc", "alloc", "oom", "snapshot"}, actions(s.DeviceTraces[0]))
	for _, name := range []string{"snap.json", "snap.pickle"} {
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, WriteFile(path, s))
		got, err := ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, s, got, name)
	}
}

func actions(tr []TraceEntry) []string {
	var out []string
	for _, e := range tr {
		out = append(out, e.Action)
	}
	return out
}

// Python's own pickle module reads the pickle as the same dictionary as the JSON, and
// pickles Python writes (protocols 2 to 5) read back as the same snapshot.
func TestPythonReadsAndWritesTheSnapshot(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	s := sampled(t)
	dir := t.TempDir()
	pk, js := filepath.Join(dir, "s.pickle"), filepath.Join(dir, "s.json")
	require.NoError(t, WriteFile(pk, s))
	require.NoError(t, WriteFile(js, s))
	script := `
import json, pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
j = json.load(open(sys.argv[2]))
def norm(v):
    if isinstance(v, (list, tuple)): return [norm(x) for x in v]
    if isinstance(v, dict): return {k: norm(x) for k, x in v.items()}
    return v
assert norm(d) == j, 'pickle and JSON differ'
assert isinstance(d['segments'][0]['segment_pool_id'], tuple)
b = d['segments'][0]['blocks'][0]
assert b['state'] == 'active_allocated' and b['frames'][0]['name'].endswith('sampled'), b
for proto in (2, 3, 4, 5):
    pickle.dump(d, open(sys.argv[3] + str(proto), 'wb'), protocol=proto)
print(len(d['device_traces'][0]))
`
	out, err := exec.Command(py, "-c", script, pk, js, filepath.Join(dir, "py")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "8\n", string(out))
	for proto := 2; proto <= 5; proto++ {
		got, err := ReadFile(filepath.Join(dir, "py") + string(rune('0'+proto)))
		require.NoError(t, err, "protocol %d", proto)
		assert.Equal(t, s, got, "protocol %d", proto)
	}
}

func TestReadErrorsNameTheLineOrField(t *testing.T) {
	var j bytes.Buffer
	require.NoError(t, WriteJSON(&j, handMade()))
	var m map[string]any
	require.NoError(t, json.Unmarshal(j.Bytes(), &m))
	edit := func(f func(m map[string]any)) string {
		var c map[string]any
		require.NoError(t, json.Unmarshal(j.Bytes(), &c))
		f(c)
		b, err := json.Marshal(c)
		require.NoError(t, err)
		return string(b)
	}
	seg0 := func(m map[string]any) map[string]any { return m["segments"].([]any)[0].(map[string]any) }
	block0 := func(m map[string]any) map[string]any { return seg0(m)["blocks"].([]any)[0].(map[string]any) }
	for _, c := range []struct{ in, want string }{
		{"{\n  \"segments\": [\n    {\"address\": 1,}\n  ]\n}", "line 3 column 20: invalid character '}'"},
		{`{"segments": [`, "line 1 column 15: unexpected end of JSON"},
		{`{} {}`, "line 1 column 4: data after the snapshot's JSON object"},
		{`"x"`, "snapshot: want a dict, got a string"},
		{`{}`, "segments: missing"},
		{edit(func(m map[string]any) { delete(seg0(m), "total_size") }), "segments[0].total_size: missing"},
		{edit(func(m map[string]any) { block0(m)["state"] = "busy" }), `segments[0].blocks[0].state: unknown state "busy"`},
		{edit(func(m map[string]any) { block0(m)["size"] = "big" }), "segments[0].blocks[0].size: want an int, got a string"},
		{edit(func(m map[string]any) { block0(m)["size"] = 1 }), "segments[0].blocks: the blocks' sizes add up to 2096129, not the segment's total_size 2097152"},
		{edit(func(m map[string]any) { block0(m)["frames"].([]any)[1].(map[string]any)["line"] = 1.5 }), "segments[0].blocks[0].frames[1].line: want an int, got a float"},
		{edit(func(m map[string]any) {
			m["device_traces"].([]any)[0].([]any)[1].(map[string]any)["action"] = "malloc"
		}), `device_traces[0][1].action: unknown action "malloc"`},
		{edit(func(m map[string]any) { m["sublet"].(map[string]any)["devices"] = 3 }), "sublet.devices: want a list, got an int"},
	} {
		_, err := Read(bytes.NewBufferString(c.in))
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
}

func TestPickleErrorsNameTheOffset(t *testing.T) {
	var p bytes.Buffer
	require.NoError(t, WritePickle(&p, handMade()))
	b := p.Bytes()
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{b[:100], "pickle byte 96: opcode 0x58: truncated"},
		{b[:len(b)-1], "unexpected end of data before STOP"},
		{[]byte("\x80\x02cos\nsystem\n."), "pickle byte 2: opcode 0x63: unsupported opcode"},
		{[]byte("\x80\x09N."), "pickle byte 0: opcode 0x80: protocol 9"},
		{[]byte("\x80\x02NN."), "pickle byte 4: STOP with 2 values on the stack"},
		{[]byte("\x80\x02h\x05."), "pickle byte 2: opcode 0x68: memo slot 5 was never set"},
		{[]byte("\x80\x02K\x01."), "snapshot: want a dict, got an int"},
	} {
		_, err := Read(bytes.NewReader(c.in))
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.want)
	}
	_, err := ReadFile(filepath.Join(t.TempDir(), "none.pickle"))
	assert.ErrorContains(t, err, "read snapshot: open")
	_, err = Read(bytes.NewReader(nil))
	assert.ErrorContains(t, err, "empty snapshot: want a pickle or JSON")
	_, err = Read(iotest.ErrReader(errors.New("disk gone")))
	assert.EqualError(t, err, "disk gone", "a read error is not an empty snapshot")
}

// Stacks that share their first frame but not their length (one a prefix of the other)
// are two stacks in the pickle, not one written once.
func TestPickleSharesOnlyWholeStacks(t *testing.T) {
	stack := []alloc.Frame{{Name: "main.step", Filename: "/src/train.go", Line: 42}, {Name: "main.main", Filename: "/src/train.go", Line: 9}}
	s := &Snapshot{DeviceTraces: [][]TraceEntry{{
		{Action: "alloc", Addr: 4096, Size: 1, Frames: stack},
		{Action: "alloc", Addr: 8192, Size: 1, Frames: stack[:1]},
		{Action: "alloc", Addr: 12288, Size: 1, Frames: stack},
	}}}
	var p bytes.Buffer
	require.NoError(t, WritePickle(&p, s))
	got, err := Read(&p)
	require.NoError(t, err)
	assert.Equal(t, s.DeviceTraces, got.DeviceTraces)
}
