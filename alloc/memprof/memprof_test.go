package memprof

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// weights and activations are two allocation sites.
func weights(t *testing.T, a *alloc.Allocator) device.Ptr {
	p, err := a.AllocTagged(4<<20, 0, alloc.Tag{Op: "Param"})
	require.NoError(t, err)
	return p
}

func activations(t *testing.T, a *alloc.Allocator) device.Ptr {
	p, err := a.AllocTagged(1<<20, 0, alloc.Tag{Op: "Relu", Scope: "step"})
	require.NoError(t, err)
	return p
}

// workload: one 4 MiB weight live, three 1 MiB activations of which one is live.
func workload(t *testing.T) (*alloc.Allocator, func()) {
	d, err := sim.New(sim.Options{Capacity: 1 << 30, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	require.NoError(t, a.RecordHistory(alloc.HistoryOptions{}))
	w := weights(t, a)
	var acts []device.Ptr
	for range 3 {
		acts = append(acts, activations(t, a))
	}
	require.NoError(t, a.Free(acts[0]))
	require.NoError(t, a.Free(acts[1]))
	return a, func() {
		require.NoError(t, a.Free(w))
		require.NoError(t, a.Free(acts[2]))
		require.NoError(t, a.EmptyCache())
		require.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
	}
}

func TestProfileValues(t *testing.T) {
	a, done := workload(t)
	defer done()
	p := Profile(a)
	require.NoError(t, p.CheckValid())
	require.Len(t, p.Sample, 2)
	byOp := map[string][]int64{}
	for _, s := range p.Sample {
		byOp[s.Label["op"][0]] = s.Value
		assert.Equal(t, []string{"sim"}, s.Label["device"])
	}
	assert.Equal(t, []int64{1, 4 << 20, 1, 4 << 20}, byOp["Param"])
	assert.Equal(t, []int64{3, 3 << 20, 1, 1 << 20}, byOp["Relu"])
	assert.Equal(t, "github.com/subletml/sublet/alloc/memprof.weights", p.Sample[0].Location[0].Line[0].Function.Name)
}

func TestGoToolPprofReadsTheProfile(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		t.Skip("no go tool at", gobin)
	}
	a, done := workload(t)
	defer done()
	path := filepath.Join(t.TempDir(), "mem.pb.gz")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, Write(f, a))
	require.NoError(t, f.Close())
	for _, c := range []struct{ index, want string }{
		{"inuse_space", "4MB 80.00% 80.00%        4MB 80.00%  github.com/subletml/sublet/alloc/memprof.weights"},
		{"alloc_objects", "3 75.00% 75.00%          3 75.00%  github.com/subletml/sublet/alloc/memprof.activations"},
	} {
		out, err := exec.Command(gobin, "tool", "pprof", "-top", "-sample_index="+c.index, path).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), c.want, "%s", out)
	}
}

func TestHandlerOverLoopback(t *testing.T) {
	a, done := workload(t)
	defer done()
	srv := httptest.NewServer(Handler(func() []*alloc.Allocator { return []*alloc.Allocator{a} }))
	defer srv.Close()
	get := func(q string) (*http.Response, []byte) {
		resp, err := http.Get(srv.URL + q)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	resp, body := get("/?device=sim")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p, err := profile.ParseData(body)
	require.NoError(t, err)
	assert.Len(t, p.Sample, 2)
	resp, body = get("/?debug=1")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "inuse_space/bytes")
	resp, body = get("/?device=cuda:7")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, string(body), `no allocator for device "cuda:7"`)
}
