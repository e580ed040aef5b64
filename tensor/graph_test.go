package tensor_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// recorder is a simulated device with a backing store that implements
// device.GraphCapturer by bookkeeping only: its ops still run when ordered (on the
// host), so these tests check what CaptureGraph arranges around a capture (streams,
// pools, refusals, clean-up), not replays; the GPU's tests check replays.
type recorder struct {
	*sim.Device
	capturing device.Stream // the stream being captured, 0 when none
	graphs    map[device.Graph]bool
	next      device.Graph
	launches  []device.Stream // the stream of each LaunchGraph
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{Device: newSim(t, 64<<20, true), graphs: map[device.Graph]bool{}}
}

func (r *recorder) BeginCapture(s device.Stream) error {
	if s == 0 || r.capturing != 0 {
		return errors.New("recorder: bad BeginCapture")
	}
	r.capturing = s
	return nil
}

func (r *recorder) EndCapture(s device.Stream) (device.Graph, error) {
	if s != r.capturing {
		return 0, errors.New("recorder: EndCapture of a stream not captured")
	}
	r.capturing = 0
	r.next++
	r.graphs[r.next] = true
	return r.next, nil
}

func (r *recorder) LaunchGraph(g device.Graph, s device.Stream) error {
	if !r.graphs[g] {
		return errors.New("recorder: no such graph")
	}
	r.launches = append(r.launches, s)
	return nil
}

func (r *recorder) DestroyGraph(g device.Graph) error {
	if !r.graphs[g] {
		return errors.New("recorder: no such graph")
	}
	delete(r.graphs, g)
	return nil
}

// streamsOf maps each live block's address to the stream its segment belongs to.
func streamsOf(t *testing.T, d device.Device) map[device.Ptr]device.Stream {
	m := map[device.Ptr]device.Stream{}
	for _, seg := range allocator(t, d).Snapshot() {
		for _, b := range seg.Blocks {
			if b.State == alloc.ActiveAllocated {
				m[b.Address] = seg.Stream
			}
		}
	}
	return m
}

// TestCaptureGraphRoutesIntoItsPool: inside a capture, what ops allocate comes from the
// capture stream's private pool, their kernels are ordered on that stream, and an
// output kept past the capture stays in the pool until it is released; Replay launches
// on stream 0; Release gives everything back.
func TestCaptureGraphRoutesIntoItsPool(t *testing.T) {
	d := newRecorder(t)
	keep := tensor.NewScope()
	w := f32(keep, d, []float32{1, 2, 3, 4}, 2, 2)
	var out *tensor.Tensor
	g, err := tensor.CaptureGraph(d, func() {
		s := keep.Child()
		defer s.Close()
		out = s.Keep(s.Bind(w).MatMul(w).Relu().Sum())
	})
	require.NoError(t, err)
	streams := streamsOf(t, d)
	require.Len(t, streams, 2, "the weight and the kept output")
	assert.Zero(t, streams[w.Storage().Ptr()])
	capture := streams[out.Storage().Ptr()]
	assert.NotZero(t, capture, "the kept output is not in the capture stream's pool")

	// After the capture, ops allocate on stream 0 again.
	after := keep.Child()
	sum := after.Bind(w).Add(w)
	assert.Zero(t, streamsOf(t, d)[sum.Storage().Ptr()])
	after.Close()

	// A second capture uses the same stream, and a pool of its own.
	g2, err := tensor.CaptureGraph(d, func() { _ = w.Add(w).Release })
	require.NoError(t, err)
	require.NoError(t, g2.Release())

	require.NoError(t, g.Replay())
	require.NoError(t, g.Replay())
	assert.Equal(t, []device.Stream{0, 0}, d.launches)
	require.NoError(t, g.Release())
	assert.Empty(t, d.graphs)
	requireOpError(t, "Graph.Replay", tensor.ErrReleased, func() { panicOn(g.Replay()) })
	requireOpError(t, "Graph.Release", tensor.ErrReleased, func() { panicOn(g.Release()) })
	keep.Close()
	requireEmpty(t, d)
}

func panicOn(err error) {
	if err != nil {
		panic(err)
	}
}

// asOpError panics with err as an op's error, which CaptureGraph returns.
func asOpError(err error) {
	if err != nil {
		panic(&tensor.Error{Op: "test", Err: err})
	}
}

// TestCaptureGraphRefuses: what a capture cannot record fails with ErrCapture inside
// it, the capture ends with that error and no graph, nothing stays routed to the pool,
// and the device captures again afterwards. Devices that cannot capture say so.
func TestCaptureGraphRefuses(t *testing.T) {
	d := newRecorder(t)
	keep := tensor.NewScope()
	x := f32(keep, d, []float32{1, 2, 3}, 3)
	inScope := func(f func(s *tensor.Scope)) func() {
		return func() {
			s := keep.Child(tensor.WithGenerator(tensor.NewGenerator(1)))
			defer s.Close()
			f(s)
		}
	}
	for name, fn := range map[string]func(){
		"Item":      inScope(func(s *tensor.Scope) { _ = s.Bind(x).Sum().Item() }),
		"ToSlice":   inScope(func(s *tensor.Scope) { _ = vals(s.Bind(x).Neg()) }),
		"FromSlice": inScope(func(s *tensor.Scope) { _ = f32(s, d, []float32{1}, 1) }),
		"Dropout":   inScope(func(s *tensor.Scope) { _ = s.Bind(x).Dropout(0.5) }),
		"Adam":      func() { tensor.StepAdam(kernels.Adam{LR: 0.1, Beta1: 0.9, Beta2: 0.999}, 1, x, x, x, x) },
		"AdamMulti": func() {
			l := []*tensor.Tensor{x}
			tensor.StepAdamMulti(kernels.Adam{LR: 0.1, Beta1: 0.9, Beta2: 0.999}, []int{1}, l, l, l, l)
		},
		"Synchronize": func() { asOpError(tensor.Synchronize(d)) },
		"nested":      func() { _, err := tensor.CaptureGraph(d, func() {}); asOpError(err) },
	} {
		g, err := tensor.CaptureGraph(d, fn)
		require.Error(t, err, name)
		assert.Nil(t, g)
		assert.ErrorIs(t, err, tensor.ErrCapture, name)
		assert.Zero(t, d.capturing, name)
	}
	g, err := tensor.CaptureGraph(d, inScope(func(s *tensor.Scope) { _ = s.Bind(x).Add(x) }))
	require.NoError(t, err)
	require.NoError(t, g.Release())
	assert.Equal(t, map[device.Ptr]device.Stream{x.Storage().Ptr(): 0}, streamsOf(t, d))
	keep.Close()
	requireEmpty(t, d)

	_, err = tensor.CaptureGraph(newCPU(t), func() {})
	assert.ErrorIs(t, err, tensor.ErrCapture)
	assert.ErrorContains(t, err, "cpu cannot record graphs")
	assert.False(t, errors.Is(err, tensor.ErrShape))
}

// TestCaptureCapturableAdam: a Capturable Adam's step can be captured once it has its
// state (a warm-up step); its first step, which makes the state, and a host-counted
// Adam's step cannot (ErrCapture, naming the reason). The recorder runs what it
// captures, so the captured step counts like an eager one.
func TestCaptureCapturableAdam(t *testing.T) {
	d := newRecorder(t)
	adam := func(capturable bool) func([]*tensor.Tensor) (optim.Optimizer, error) {
		return func(ps []*tensor.Tensor) (optim.Optimizer, error) {
			c := optim.DefaultAdamW()
			c.Capturable = capturable
			return optim.NewAdamW(ps, c)
		}
	}
	capture := func(m *graphModel) error {
		outs := tensor.NewScope()
		defer outs.Close()
		g, err := tensor.CaptureGraph(d, func() { m.step(outs) })
		if err == nil {
			err = g.Release()
		}
		return err
	}
	eagerStep := func(m *graphModel) {
		s := tensor.NewScope()
		defer s.Close()
		m.step(s)
	}

	cold := newGraphModel(t, d, adam(true))
	err := capture(cold)
	require.ErrorIs(t, err, tensor.ErrCapture)
	require.ErrorContains(t, err, "first step makes its moments")

	host := newGraphModel(t, d, adam(false))
	eagerStep(host)
	err = capture(host)
	require.ErrorIs(t, err, tensor.ErrCapture)
	require.ErrorContains(t, err, "keeps the counts on the device")

	warm := newGraphModel(t, d, adam(true))
	eagerStep(warm)
	require.NoError(t, capture(warm))
	s := tensor.NewScope()
	for _, st := range warm.opt.StateDict(s).State {
		assert.Equal(t, 2.0, st["step"].Item(), "the warm-up step and the captured one")
	}
	s.Close()
	for _, m := range []*graphModel{cold, host, warm} {
		m.release()
	}
	requireEmpty(t, d)
}
