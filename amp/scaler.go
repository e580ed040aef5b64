package amp

import (
	"errors"
	"fmt"
	"math"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Optimizer is what a GradScaler drives: the parameters whose gradients it unscales
// and checks, and the step it takes or skips (optim's optimizers have both).
type Optimizer interface {
	Params() []*tensor.Tensor
	Step()
}

// The GradScaler's misuse errors say what PyTorch's say (errors.Is finds them in the
// returned error, which names the method).
var (
	ErrUnscaledTwice    = errors.New("unscale_() has already been called on this optimizer since the last update().")
	ErrUnscaleAfterStep = errors.New("unscale_() is being called after step().")
	ErrSteppedTwice     = errors.New("step() has already been called since the last update().")
	// ErrNoInfChecks: Update found no optimizer whose gradients were unscaled since
	// the last update.
	ErrNoInfChecks = errors.New("No inf checks were recorded prior to update.")
	// ErrNoInfChecksForOptimizer: Step found none of the optimizer's parameters with
	// a gradient to check.
	ErrNoInfChecksForOptimizer = errors.New("No inf checks were recorded for this optimizer.")
	// ErrFP16Gradients: master parameters (and so their gradients) must be F32 (BF16
	// passes, as in PyTorch); autocast keeps them F32.
	ErrFP16Gradients = errors.New("Attempting to unscale FP16 gradients.")
	// ErrEmptyState: LoadState of the State of a disabled scaler.
	ErrEmptyState = errors.New("The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.")
	// ErrNotScaled: Unscale, Step, Update or UpdateTo before the scaler's first Scale
	// (PyTorch's lazily made scale tensor is still None then). The error reads as
	// PyTorch's: "Attempted unscale_ but _scale is None.  This may indicate …".
	ErrNotScaled = errors.New("_scale is None")
)

// notScaled is the error of method (PyTorch's name funcname for it) before any Scale.
func notScaled(method, funcname string) error {
	return fmt.Errorf("amp: GradScaler.%s: Attempted %s but %w.  This may indicate your script did not use "+
		"scaler.scale(loss or outputs) earlier in the iteration. (Backpropagate GradScaler.Scale(loss).)", method, funcname, ErrNotScaled)
}

// ScalerConfig configures a GradScaler. Zero fields take PyTorch's defaults.
type ScalerConfig struct {
	// InitScale is the first scale (default 2^16 = 65536).
	InitScale float64
	// GrowthFactor multiplies the scale after GrowthInterval steps in a row without an
	// Inf or a NaN (default 2; must be > 1).
	GrowthFactor float64
	// BackoffFactor multiplies the scale after a step with an Inf or a NaN (default
	// 0.5; must be in (0, 1)).
	BackoffFactor float64
	// GrowthInterval is that number of steps (default 2000).
	GrowthInterval int
	// Disabled makes every method a pass-through: Scale returns its input, Step steps,
	// the rest does nothing, GetScale is 1.
	Disabled bool
}

// GradScaler is torch.amp.GradScaler: dynamic loss scaling for F16 training. Each
// iteration: Scale the loss and backpropagate the scaled loss; optionally Unscale an
// optimizer to work on the true gradients (clipping); Step each optimizer (it unscales
// if needed and skips the step when a gradient holds an Inf or a NaN); Update once.
//
// The scale and the growth tracker live on the host (PyTorch keeps them in two
// device scalars to avoid a synchronization; the CPU kernels report found-inf
// directly), so the scaler holds no device memory. A GradScaler is used by one
// goroutine at a time.
type GradScaler struct {
	enabled bool // set at construction
	// Changed by Update and LoadState only.
	scale           float32 // the scale S the loss is multiplied by
	tracker         int32   // consecutive steps without Inf or NaN since the scale last changed
	growth, backoff float64
	interval        int32
	// opts are the optimizers seen since the last Update; Update forgets them.
	opts map[Optimizer]*optState
	// scaled is set by the first Scale; until then Unscale, Step, Update and UpdateTo
	// refuse, as PyTorch's do before its scale tensor exists.
	scaled bool
}

// stage is where an optimizer is in the iteration.
type stage uint8

const (
	stageReady    stage = iota // nothing done since the last Update
	stageUnscaled              // Unscale ran
	stageStepped               // Step ran (or skipped the optimizer's step)
)

type optState struct {
	stage    stage
	checked  bool // some gradient was checked by Unscale
	foundInf bool // an Inf or a NaN was among them
}

// NewGradScaler returns a scaler configured by c (zero fields: PyTorch's defaults);
// without c, torch.amp.GradScaler() itself: amp.NewGradScaler().
func NewGradScaler(config ...ScalerConfig) (*GradScaler, error) {
	var c ScalerConfig
	switch len(config) {
	case 0:
	case 1:
		c = config[0]
	default:
		return nil, fmt.Errorf("amp: NewGradScaler: %d configurations; pass one, or none for PyTorch's defaults", len(config))
	}
	if c.InitScale == 0 {
		c.InitScale = 65536
	}
	if c.GrowthFactor == 0 {
		c.GrowthFactor = 2
	}
	if c.BackoffFactor == 0 {
		c.BackoffFactor = 0.5
	}
	if c.GrowthInterval == 0 {
		c.GrowthInterval = 2000
	}
	g := &GradScaler{enabled: !c.Disabled, opts: map[Optimizer]*optState{}}
	if err := g.set(ScalerState{Scale: c.InitScale, GrowthFactor: c.GrowthFactor, BackoffFactor: c.BackoffFactor,
		GrowthInterval: c.GrowthInterval}); err != nil {
		return nil, fmt.Errorf("amp: NewGradScaler: %w", err)
	}
	return g, nil
}

// set validates st and makes it the scaler's state.
func (g *GradScaler) set(st ScalerState) error {
	switch {
	case !(st.GrowthFactor > 1) || math.IsInf(st.GrowthFactor, 1):
		return fmt.Errorf("growth factor %v: The growth factor must be > 1.0.", st.GrowthFactor)
	case !(st.BackoffFactor < 1) || !(st.BackoffFactor > 0):
		return fmt.Errorf("backoff factor %v: The backoff factor must be < 1.0. It must also be above 0.", st.BackoffFactor)
	case st.GrowthInterval <= 0 || st.GrowthInterval > math.MaxInt32:
		return fmt.Errorf("growth interval %d: give a number of steps from 1 to %d", st.GrowthInterval, math.MaxInt32)
	case st.GrowthTracker < 0 || st.GrowthTracker >= st.GrowthInterval:
		return fmt.Errorf("growth tracker %d: it counts steps since the last change of scale, from 0 to the growth interval %d less one",
			st.GrowthTracker, st.GrowthInterval)
	}
	if err := checkScale(st.Scale); err != nil {
		return err
	}
	g.scale, g.tracker = float32(st.Scale), int32(st.GrowthTracker)
	g.growth, g.backoff, g.interval = st.GrowthFactor, st.BackoffFactor, int32(st.GrowthInterval)
	return nil
}

// checkScale refuses a scale the float32 state cannot hold as a positive finite value.
func checkScale(s float64) error {
	if f := float32(s); !(f > 0) || math.IsInf(float64(f), 1) {
		return fmt.Errorf("scale %v: give a positive float32 value (at most %v)", s, math.MaxFloat32)
	}
	return nil
}

// Scale returns t·S, the loss to backpropagate (t itself when disabled). The result
// has t's type and belongs where an op on t puts it. Until the first Scale, Unscale,
// Step, Update and UpdateTo refuse with ErrNotScaled, as PyTorch's do.
func (g *GradScaler) Scale(t *tensor.Tensor) *tensor.Tensor {
	if !g.enabled {
		return t
	}
	g.scaled = true
	return t.MulScalar(float64(g.scale))
}

// state is opt's record since the last Update.
func (g *GradScaler) state(opt Optimizer) *optState {
	st, ok := g.opts[opt]
	if !ok {
		st = &optState{}
		g.opts[opt] = st
	}
	return st
}

// Unscale divides opt's parameters' gradients by S in place, multiplying by 1/S
// computed in float64 and rounded to float32 as PyTorch does, and records whether any
// element was an Inf or a NaN (checked before the multiplication). Call it at most once
// per optimizer between Updates, before Step, when the true gradients are needed
// (clipping); Step calls it otherwise. F16 gradients are refused before any is
// touched. On a device that keeps no data (meta) nothing is computed and no Inf is
// found.
func (g *GradScaler) Unscale(opt Optimizer) error {
	if !g.enabled {
		return nil
	}
	if !g.scaled {
		return notScaled("Unscale", "unscale_")
	}
	if err := g.unscale(opt); err != nil {
		return fmt.Errorf("amp: GradScaler.Unscale: %w", err)
	}
	return nil
}

func (g *GradScaler) unscale(opt Optimizer) error {
	st := g.state(opt)
	switch st.stage {
	case stageUnscaled:
		return ErrUnscaledTwice
	case stageStepped:
		return ErrUnscaleAfterStep
	}
	var grads []*tensor.Tensor
	for _, p := range opt.Params() {
		gr := p.Grad()
		if gr == nil {
			continue
		}
		if gr.DType() == dtype.F16 {
			return fmt.Errorf("a gradient of %v: %w Keep master parameters in F32 (autocast casts them per op)", gr.Shape(), ErrFP16Gradients)
		}
		grads = append(grads, gr)
	}
	found, err := unscaleAll(grads, 1/float64(g.scale))
	if err != nil {
		return err
	}
	st.foundInf = st.foundInf || found
	st.checked = st.checked || len(grads) > 0
	st.stage = stageUnscaled
	return nil
}

// Step unscales opt's gradients unless Unscale did, then takes opt's step, or skips it
// when a gradient held an Inf or a NaN (the parameters stay as they were). It reports
// whether the step was taken. Disabled, it just steps.
func (g *GradScaler) Step(opt Optimizer) (stepped bool, err error) {
	if !g.enabled {
		opt.Step()
		return true, nil
	}
	if !g.scaled {
		return false, notScaled("Step", "step")
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("amp: GradScaler.Step: %w", err)
		}
	}()
	st := g.state(opt)
	if st.stage == stageStepped {
		return false, ErrSteppedTwice
	}
	if st.stage == stageReady {
		if err := g.unscale(opt); err != nil {
			return false, err
		}
	}
	if !st.checked {
		return false, ErrNoInfChecksForOptimizer
	}
	st.stage = stageStepped
	if st.foundInf {
		return false, nil
	}
	opt.Step()
	return true, nil
}

// Update adjusts the scale for the next iteration from the Inf checks of every
// optimizer since the last Update (PyTorch's _amp_update_scale_): an Inf or a NaN in
// any halves it (times BackoffFactor) and restarts the count of good steps; the
// GrowthInterval-th good step in a row doubles it (times GrowthFactor) unless that
// would overflow float32, and restarts the count. It then forgets the optimizers'
// records. Disabled, it does nothing.
func (g *GradScaler) Update() error {
	if !g.enabled {
		return nil
	}
	if !g.scaled {
		return notScaled("Update", "update")
	}
	checked, found := false, false
	for _, st := range g.opts {
		checked = checked || st.checked
		found = found || st.foundInf
	}
	if !checked {
		return fmt.Errorf("amp: GradScaler.Update: %w", ErrNoInfChecks)
	}
	if found {
		g.scale = float32(float64(g.scale) * g.backoff)
		g.tracker = 0
	} else if good := g.tracker + 1; good == g.interval {
		if grown := float32(float64(g.scale) * g.growth); !math.IsInf(float64(grown), 0) {
			g.scale = grown
		}
		g.tracker = 0
	} else {
		g.tracker = good
	}
	clear(g.opts)
	return nil
}

// UpdateTo is Update with a scale of the caller's choice (update(new_scale)): the scale
// becomes s (rounded to float32), the growth tracker is kept, and the optimizers'
// records are forgotten. Disabled, it does nothing.
func (g *GradScaler) UpdateTo(s float64) error {
	if !g.enabled {
		return nil
	}
	if err := checkScale(s); err != nil {
		return fmt.Errorf("amp: GradScaler.UpdateTo: %w", err)
	}
	if !g.scaled {
		return notScaled("UpdateTo", "update")
	}
	g.scale = float32(s)
	clear(g.opts)
	return nil
}

// GetScale is the current scale (1 when disabled).
func (g *GradScaler) GetScale() float64 {
	if !g.enabled {
		return 1
	}
	return float64(g.scale)
}

// GrowthTracker is the number of steps in a row without an Inf or a NaN since the
// scale last changed.
func (g *GradScaler) GrowthTracker() int { return int(g.tracker) }

// Enabled reports whether the scaler scales.
func (g *GradScaler) Enabled() bool { return g.enabled }

// ScalerState is what State saves and LoadState restores (PyTorch's state_dict keys).
// Save it after Update.
type ScalerState struct {
	Scale          float64 `json:"scale"`
	GrowthFactor   float64 `json:"growth_factor"`
	BackoffFactor  float64 `json:"backoff_factor"`
	GrowthInterval int     `json:"growth_interval"`
	GrowthTracker  int     `json:"_growth_tracker"`
}

// State returns the scaler's state; the zero ScalerState (PyTorch's empty dict) when
// disabled.
func (g *GradScaler) State() ScalerState {
	if !g.enabled {
		return ScalerState{}
	}
	return ScalerState{Scale: float64(g.scale), GrowthFactor: g.growth, BackoffFactor: g.backoff,
		GrowthInterval: int(g.interval), GrowthTracker: int(g.tracker)}
}

// LoadState restores a State. A disabled scaler ignores it; the zero state (from a
// disabled scaler) is ErrEmptyState, an invalid one an error naming the field.
func (g *GradScaler) LoadState(st ScalerState) error {
	if !g.enabled {
		return nil
	}
	if st == (ScalerState{}) {
		return fmt.Errorf("amp: GradScaler.LoadState: %w", ErrEmptyState)
	}
	if err := g.set(st); err != nil {
		return fmt.Errorf("amp: GradScaler.LoadState: %w", err)
	}
	return nil
}

// unscaleAll multiplies every gradient by inv in place, in one fused unscale and inf
// check per device (one launch per table of gradients on a GPU), and reports whether
// any held an Inf or a NaN: one flag per device, read once after all of its gradients
// (which waits for the device). A device that keeps no data finds none.
func unscaleAll(grads []*tensor.Tensor, inv float64) (found bool, err error) {
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	flags := map[device.Device]*tensor.Tensor{}
	lists := map[device.Device][]*tensor.Tensor{}
	var order []*tensor.Tensor
	err = tensor.Try(func() {
		for _, gr := range grads {
			f := flags[gr.Device()]
			if f == nil {
				f = s.Zeros(gr.Device(), dtype.F32)
				flags[gr.Device()] = f
				order = append(order, f)
			}
			lists[gr.Device()] = append(lists[gr.Device()], gr)
		}
		for _, f := range order {
			tensor.UnscaleMulti(lists[f.Device()], inv, f)
		}
		for _, f := range order {
			if f.Storage().Residency() != device.Meta && f.Item() != 0 {
				found = true
			}
		}
	})
	return found, err
}
