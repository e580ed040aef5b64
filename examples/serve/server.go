package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// estimate is the memory a forward of n rows takes at its peak beyond the parameters:
// fixed + perRow·n allocated bytes, fitted to two forwards measured on the meta device.
type estimate struct {
	fixed, perRow int64
}

func (e estimate) bytes(rows int) int64 { return e.fixed + e.perRow*int64(rows) }

// calibrate measures the forward of model-shaped MLPs of sizes on a meta device at 1
// and at 1024 rows and fits the estimate.
func calibrate(sizes []int) (estimate, error) {
	dev, err := sim.New(sim.Options{})
	if err != nil {
		return estimate{}, err
	}
	a, err := alloc.For(dev)
	if err != nil {
		return estimate{}, err
	}
	m := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: sizes})
	defer m.Release()
	peak := func(rows int) (p int64, err error) {
		base := demo.Read(a).Allocated
		a.ResetPeakStats()
		err = tensor.Try(func() {
			s := tensor.NewScope(tensor.NoGrad())
			defer s.Close()
			m.Forward(s.Zeros(dev, dtype.F32, rows, sizes[0])).Argmax(1)
		})
		return demo.Read(a).PeakAllocated - base, err
	}
	const big = 1024
	p1, err := peak(1)
	if err != nil {
		return estimate{}, err
	}
	pn, err := peak(big)
	if err != nil {
		return estimate{}, err
	}
	e := estimate{perRow: (pn - p1 + big - 2) / (big - 1)}
	e.fixed = max(p1-e.perRow, 0)
	return e, nil
}

// server answers inference requests with one model, admitting each forward by its
// estimated memory so that the admitted ones together stay within the budget.
type server struct {
	// Set by newServer, never changed.
	dev              device.Device
	a                *alloc.Allocator
	model            nn.Module
	features, labels int
	est              estimate
	budget           int64
	// maxRows is the most rows one forward is admitted with: a larger request is
	// split into pieces of at most that many rows.
	maxRows int

	mu sync.Mutex
	// admitted is the estimated bytes of the forwards running now; wake is closed and
	// replaced whenever admitted shrinks. Guarded by mu.
	admitted int64
	wake     chan struct{}

	// Counters, updated atomically.
	requests, served, failed, split, ooms, waits atomic.Int64
}

func newServer(dev device.Device, a *alloc.Allocator, model nn.Module, sizes []int, est estimate, budget int64) (*server, error) {
	maxRows := int((budget - est.fixed) / est.perRow)
	if maxRows < 1 {
		return nil, fmt.Errorf("a budget of %d bytes admits no forward: one row is estimated at %d", budget, est.bytes(1))
	}
	return &server{dev: dev, a: a, model: model, features: sizes[0], labels: sizes[len(sizes)-1], est: est, budget: budget,
		maxRows: maxRows, wake: make(chan struct{})}, nil
}

// admit waits until n more estimated bytes fit the budget and takes them.
func (s *server) admit(ctx context.Context, n int64) error {
	waited := false
	for {
		s.mu.Lock()
		if s.admitted+n <= s.budget {
			s.admitted += n
			s.mu.Unlock()
			if waited {
				s.waits.Add(1)
			}
			return nil
		}
		wake := s.wake
		s.mu.Unlock()
		waited = true
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// leave gives back n admitted bytes and wakes the waiting.
func (s *server) leave(n int64) {
	s.mu.Lock()
	s.admitted -= n
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// classify returns the class of each row of x (rows × features values): the request
// in pieces the budget admits, and a piece that runs out of memory anyway (the
// estimate is not the allocator: fragmentation, other work) in halves, down to one
// row. pieces is how many forwards answered it.
func (s *server) classify(ctx context.Context, x []float32) (classes []int64, pieces int, err error) {
	rows := len(x) / s.features
	for start := 0; start < rows; start += s.maxRows {
		end := min(start+s.maxRows, rows)
		c, p, err := s.forward(ctx, x[start*s.features:end*s.features])
		if err != nil {
			return nil, pieces, err
		}
		classes, pieces = append(classes, c...), pieces+p
	}
	return classes, pieces, nil
}

// forward runs one admitted forward on x, halving it on out of memory.
func (s *server) forward(ctx context.Context, x []float32) ([]int64, int, error) {
	rows := len(x) / s.features
	need := s.est.bytes(rows)
	if err := s.admit(ctx, need); err != nil {
		return nil, 0, err
	}
	var out []int64
	err := tensor.Try(func() {
		sc := tensor.NewScope(tensor.NoGrad())
		defer sc.Close()
		logits := s.model.Forward(tensor.FromSlice(sc, s.dev, dtype.F32, x, rows, s.features))
		out = tensor.ToSlice[int64](logits.Argmax(1))
	})
	s.leave(need)
	var oom *alloc.OOMError
	if err == nil || !errors.As(err, &oom) || rows == 1 {
		return out, 1, err
	}
	s.ooms.Add(1)
	half := rows / 2 * s.features
	a, pa, err := s.forward(ctx, x[:half])
	if err != nil {
		return nil, pa, err
	}
	b, pb, err := s.forward(ctx, x[half:])
	return append(a, b...), pa + pb, err
}

// request and response are /infer's bodies.
type request struct {
	Inputs [][]float32 `json:"inputs"`
}

type response struct {
	Classes []int64 `json:"classes"`
	// Pieces is how many forwards answered the request (more than one: degraded).
	Pieces int    `json:"pieces"`
	Error  string `json:"error,omitempty"`
}

// memory is /memory's body.
type memory struct {
	Allocated       int64 `json:"allocated"`
	Requested       int64 `json:"requested"`
	Backend         int64 `json:"backend"` // of requested, what the kernels keep (the cuBLAS workspace)
	Reserved        int64 `json:"reserved"`
	PeakReserved    int64 `json:"peak_reserved"`
	Capacity        int64 `json:"capacity"`
	Parameters      int64 `json:"parameters"`
	Budget          int64 `json:"budget"`
	Admitted        int64 `json:"admitted"`
	EstimatePerRow  int64 `json:"estimate_per_row"`
	MaxRows         int64 `json:"max_rows"`
	NumAllocRetries int64 `json:"num_alloc_retries"`
	NumOOMs         int64 `json:"num_ooms"`
	Requests        int64 `json:"requests"`
	Served          int64 `json:"served"`
	Failed          int64 `json:"failed"`
	Split           int64 `json:"split"`
	OOMsCaught      int64 `json:"ooms_caught"`
	Waits           int64 `json:"waits"`
}

func (s *server) memory() memory {
	m := demo.Read(s.a)
	_, capacity, _ := s.dev.MemInfo()
	s.mu.Lock()
	admitted := s.admitted
	s.mu.Unlock()
	return memory{
		Allocated: m.Allocated, Requested: m.Requested, Backend: m.Backend, Reserved: m.Reserved,
		PeakReserved: m.PeakReserved, Capacity: capacity, Parameters: nn.ParameterBytes(s.model),
		Budget: s.budget, Admitted: admitted, EstimatePerRow: s.est.perRow, MaxRows: int64(s.maxRows),
		NumAllocRetries: m.Retries, NumOOMs: m.OOMs,
		Requests: s.requests.Load(), Served: s.served.Load(), Failed: s.failed.Load(), Split: s.split.Load(),
		OOMsCaught: s.ooms.Load(), Waits: s.waits.Load(),
	}
}

// maxBody bounds a request body.
const maxBody = 64 << 20

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /infer", s.serveInfer)
	mux.HandleFunc("GET /memory", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.memory()) })
	return mux
}

func (s *server) serveInfer(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	var req request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		s.failed.Add(1)
		writeJSON(w, http.StatusBadRequest, response{Error: "decoding the request: " + err.Error()})
		return
	}
	x := make([]float32, 0, len(req.Inputs)*s.features)
	for i, row := range req.Inputs {
		if len(row) != s.features {
			s.failed.Add(1)
			writeJSON(w, http.StatusBadRequest, response{Error: fmt.Sprintf("input %d has %d values; the model takes %d", i, len(row), s.features)})
			return
		}
		x = append(x, row...)
	}
	if len(req.Inputs) == 0 {
		s.failed.Add(1)
		writeJSON(w, http.StatusBadRequest, response{Error: "no inputs"})
		return
	}
	classes, pieces, err := s.classify(r.Context(), x)
	if err != nil {
		s.failed.Add(1)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, response{Error: err.Error()})
		return
	}
	s.served.Add(1)
	if pieces > 1 {
		s.split.Add(1)
	}
	writeJSON(w, http.StatusOK, response{Classes: classes, Pieces: pieces})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client is gone if this fails: nothing to do
}
