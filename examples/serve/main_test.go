package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/jsonkeys"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// small is a load test of 2 rounds of 2 clients × 4 requests of up to 500 rows: a
// fraction of a second.
var small = []string{"-clients", "2", "-requests", "4", "-max-rows", "500", "-budget", "1"}

// lastMemory decodes the GET /memory line the run printed last.
func lastMemory(t *testing.T, out string) memory {
	i := strings.LastIndex(out, "GET /memory: ")
	require.GreaterOrEqual(t, i, 0, out)
	body := []byte(strings.TrimSpace(out[i+len("GET /memory: "):]))
	bad, err := jsonkeys.Bad(body)
	require.NoError(t, err)
	require.Empty(t, bad, "GET /memory's keys are snake_case")
	var m memory
	require.NoError(t, json.Unmarshal(body, &m))
	return m
}

func TestLoadTestAnswersEveryRequestAndMemoryIsFlat(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(small, &out), out.String())
	m := lastMemory(t, out.String())
	assert.Equal(t, int64(2*2*4), m.Requests)
	assert.Equal(t, m.Requests, m.Served, "no request lost")
	assert.Zero(t, m.Failed)
	assert.Positive(t, m.Split, "requests over the budget's 454 rows are answered in pieces")
	assert.Equal(t, m.Parameters, m.Requested, "after the load only the parameters are held")
	assert.Zero(t, m.Admitted)
	assert.Zero(t, m.NumOOMs, "within the budget nothing runs out of memory")
	assert.Contains(t, out.String(), "every request answered")
}

// A budget larger than the device: forwards run out of memory (a forward of more than
// 1024 rows needs blocks over 1 MiB, which take segments of 20 MiB, and the device has
// 2), the guard catches every one and answers in halves.
func TestOutOfMemoryDegradesInsteadOfFailing(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-clients", "3", "-requests", "3", "-max-rows", "2000", "-capacity", "2", "-budget", "64", "-rounds", "1"}, &out), out.String())
	m := lastMemory(t, out.String())
	assert.Equal(t, m.Requests, m.Served)
	assert.Zero(t, m.Failed)
	assert.Positive(t, m.OOMsCaught)
	assert.Equal(t, m.NumOOMs, m.OOMsCaught, "every out-of-memory error of the allocator was caught by the guard")
	assert.Equal(t, m.Parameters, m.Requested)
	assert.LessOrEqual(t, m.PeakReserved, int64(2*mib))
}

// The answers are the model's: the same as a forward of each request on the CPU,
// whatever pieces the service cut it into.
func TestAnswersAreTheModels(t *testing.T) {
	c, err := parseFlags([]string{"-capacity", "2", "-budget", "64"}, io.Discard)
	require.NoError(t, err)
	dev, a, err := open(c)
	require.NoError(t, err)
	est, err := calibrate(c.sizes)
	require.NoError(t, err)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed)}, nn.MLPConfig{Sizes: c.sizes})
	srv, err := newServer(dev, a, model, c.sizes, est, 1<<20)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.handler())
	defer hs.Close()

	host, err := cpu.New(cpu.Options{})
	require.NoError(t, err)
	ref := nn.NewMLP(nn.Init{Device: host, Gen: tensor.NewGenerator(c.seed)}, nn.MLPConfig{Sizes: c.sizes})
	for _, n := range []int{1, 7, 454, 455, 1000} {
		rows := make([][]float32, n)
		flat := make([]float32, 0, n*64)
		for i := range rows {
			rows[i] = make([]float32, 64)
			for j := range rows[i] {
				rows[i][j] = float32((i*31+j*7)%13) - 6
			}
			flat = append(flat, rows[i]...)
		}
		status, resp, err := post(hs.URL, rows)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, resp.Error)
		s := tensor.NewScope(tensor.NoGrad())
		want := tensor.ToSlice[int64](ref.Forward(tensor.FromSlice(s, host, dtype.F32, flat, n, 64)).Argmax(1))
		s.Close()
		assert.Equal(t, want, resp.Classes, "%d rows in %d pieces", n, resp.Pieces)
		assert.Equal(t, (n+srv.maxRows-1)/srv.maxRows, resp.Pieces, "%d rows", n)
	}
	ref.Release()
	tensortest.RequireEmpty(t, host)
	assert.Equal(t, nn.ParameterBytes(model), demo.Read(a).Requested, "every forward released what it made")
	model.Release()
	require.NoError(t, demo.Drain(a))
}

func TestBadRequests(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	dev, a, err := open(c)
	require.NoError(t, err)
	est, err := calibrate(c.sizes)
	require.NoError(t, err)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: c.sizes})
	srv, err := newServer(dev, a, model, c.sizes, est, 1<<20)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.handler())
	defer hs.Close()
	for body, want := range map[string]string{
		`{"inputs": [[1, 2]]}`: "input 0 has 2 values; the model takes 64",
		`{"inputs": []}`:       "no inputs",
		`{"inputs": `:          "decoding the request",
	} {
		resp, err := http.Post(hs.URL+"/infer", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		var r response
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		assert.Contains(t, r.Error, want)
	}
	assert.Equal(t, int64(3), srv.memory().Failed)
	resp, err := http.Get(hs.URL + "/infer")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	_, err = newServer(dev, a, model, c.sizes, est, 100)
	assert.ErrorContains(t, err, "admits no forward")
	model.Release()
	require.NoError(t, demo.Drain(a))
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-device", "sim"}, {"-sizes", "64"}, {"-sizes", "a,b"}, {"-clients", "0"}, {"-budget", "-1"}, {"extra"},
	} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
