package optim

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Scheduler changes the learning rates of an optimizer's parameter groups, once per
// Step (torch.optim.lr_scheduler). Call Step after the optimizer's Step, once per
// epoch or per iteration as the schedule is counted. A scheduler is used by the
// goroutine using its optimizer.
type Scheduler interface {
	// Step advances the schedule by one and sets the groups' learning rates.
	Step()
	// LastLR returns the learning rates the last Step set, one per group
	// (get_last_lr).
	LastLR() []float64

	optimizer() groups
}

// groups is what a scheduler needs of an optimizer: this package's optimizers, whose
// initial learning rates the schedulers of one optimizer share.
type groups interface {
	Optimizer
	schedule() *params
}

func (g *params) schedule() *params { return g }

// LRScheduler is one schedule (StepLR, LinearLR, CosineAnnealingLR, LambdaLR) with
// PyTorch's semantics: made with last_epoch = −1, it records each group's learning
// rate as the group's initial rate unless a scheduler of the optimizer did already
// (initial_lr), takes those as its base rates and runs its first step, to epoch 0.
// Step then applies the chainable form, so schedules compose: ChainedScheduler runs
// several on one optimizer, SequentialLR one after another.
type LRScheduler struct {
	name string
	o    groups
	r    lrRule
	base []float64 // base_lrs, set at construction

	epoch   int       // last_epoch
	steps   int       // _step_count
	initial bool      // in the first step, made by the constructor (_is_initial)
	last    []float64 // the rates the last step set
}

// lrRule is what a schedule computes.
type lrRule interface {
	// next is the chainable form: the rates at s.epoch given the groups' rates now.
	next(s *LRScheduler, lrs []float64) []float64
	// closed is the closed form: the rates at s.epoch from the base rates.
	closed(s *LRScheduler) []float64
}

func newScheduler(name string, o Optimizer, r lrRule) (*LRScheduler, error) {
	g, ok := o.(groups)
	if !ok {
		return nil, fmt.Errorf("optim: %s: the optimizer is a %T; schedulers drive this package's optimizers", name, o)
	}
	ps := g.schedule()
	if ps.initialLR == nil {
		ps.initialLR = lrsOf(g)
	}
	s := &LRScheduler{name: name, o: g, r: r, base: slices.Clone(ps.initialLR), epoch: -1}
	s.initialStep()
	return s, nil
}

// lrsOf is every group's learning rate now.
func lrsOf(o Optimizer) []float64 {
	lrs := make([]float64, o.NumGroups())
	for i := range lrs {
		lrs[i] = o.LR(i)
	}
	return lrs
}

func (s *LRScheduler) optimizer() groups { return s.o }

// initialStep is the step the constructor runs (_initial_step).
func (s *LRScheduler) initialStep() {
	s.steps = 0
	s.initial = true
	s.Step()
	s.initial = false
}

// Step advances the schedule by one and sets the groups' learning rates.
func (s *LRScheduler) Step() {
	s.steps++
	s.epoch++
	s.apply(s.r.next(s, lrsOf(s.o)))
}

// restart sets the schedule to epoch 0 by its closed form (what SequentialLR does at a
// milestone, _update_lr(0)).
func (s *LRScheduler) restart() {
	s.epoch = 0
	s.apply(s.r.closed(s))
}

func (s *LRScheduler) apply(lrs []float64) {
	for i, lr := range lrs {
		s.o.SetLR(i, lr)
	}
	s.last = lrsOf(s.o)
}

// LastLR returns the learning rates the last Step set.
func (s *LRScheduler) LastLR() []float64 { return slices.Clone(s.last) }

// Epoch is the number of Steps since the constructor's (last_epoch).
func (s *LRScheduler) Epoch() int { return s.epoch }

// scaled returns lrs, each times f.
func scaled(lrs []float64, f float64) []float64 {
	out := make([]float64, len(lrs))
	for i, lr := range lrs {
		out[i] = lr * f
	}
	return out
}

// NewStepLR multiplies the learning rates by gamma every stepSize steps
// (torch.optim.lr_scheduler.StepLR): base·gamma^⌊epoch/stepSize⌋. gamma is optional
// (PyTorch's default 0.1).
func NewStepLR(o Optimizer, stepSize int, gammaOpt ...float64) (*LRScheduler, error) {
	gamma, err := optional("StepLR", "gamma", 0.1, gammaOpt)
	if err != nil {
		return nil, err
	}
	if stepSize < 1 || !(gamma >= 0) {
		return nil, fmt.Errorf("optim: StepLR: step size %d and gamma %g: need a step size ≥ 1 and gamma ≥ 0", stepSize, gamma)
	}
	return newScheduler("StepLR", o, stepLR{stepSize, gamma})
}

type stepLR struct {
	size  int
	gamma float64
}

func (r stepLR) next(s *LRScheduler, lrs []float64) []float64 {
	if s.epoch == 0 || s.epoch%r.size != 0 {
		return lrs
	}
	return scaled(lrs, r.gamma)
}

func (r stepLR) closed(s *LRScheduler) []float64 {
	return scaled(s.base, math.Pow(r.gamma, float64(s.epoch/r.size)))
}

// NewLinearLR multiplies the base learning rates by a factor going linearly from
// start to end over totalIters steps, then end (torch.optim.lr_scheduler.LinearLR): a
// linear warm-up with end 1. start is in (0, 1], end in [0, 1].
func NewLinearLR(o Optimizer, start, end float64, totalIters int) (*LRScheduler, error) {
	switch {
	case !(start > 0 && start <= 1):
		return nil, fmt.Errorf("optim: LinearLR: start factor %g: it must be in (0, 1]", start)
	case !(end >= 0 && end <= 1):
		return nil, fmt.Errorf("optim: LinearLR: end factor %g: it must be in [0, 1]", end)
	case totalIters < 1:
		return nil, fmt.Errorf("optim: LinearLR: %d total iterations: need at least 1", totalIters)
	}
	return newScheduler("LinearLR", o, linearLR{start, end, totalIters})
}

type linearLR struct {
	start, end float64
	total      int
}

func (r linearLR) next(s *LRScheduler, lrs []float64) []float64 {
	switch {
	case s.epoch == 0:
		return scaled(lrs, r.start)
	case s.initial || s.epoch > r.total:
		return lrs
	}
	d := r.end - r.start
	return scaled(lrs, 1+d/(float64(r.total)*r.start+float64(s.epoch-1)*d))
}

func (r linearLR) closed(s *LRScheduler) []float64 {
	f := r.start + (r.end-r.start)*float64(min(r.total, s.epoch))/float64(r.total)
	return scaled(s.base, f)
}

// NewCosineAnnealingLR anneals the learning rates from their base to etaMin along a
// half cosine over tMax steps (torch.optim.lr_scheduler.CosineAnnealingLR, without
// restarts): etaMin + (base − etaMin)·(1 + cos(π·epoch/tMax))/2, continued past tMax
// as the cosine goes on. etaMin is optional (PyTorch's default 0):
// NewCosineAnnealingLR(opt, epochs).
func NewCosineAnnealingLR(o Optimizer, tMax int, etaMinOpt ...float64) (*LRScheduler, error) {
	etaMin, err := optional("CosineAnnealingLR", "eta_min", 0, etaMinOpt)
	if err != nil {
		return nil, err
	}
	if tMax < 1 || !(etaMin >= 0) {
		return nil, fmt.Errorf("optim: CosineAnnealingLR: T_max %d and eta_min %g: need T_max ≥ 1 and eta_min ≥ 0", tMax, etaMin)
	}
	return newScheduler("CosineAnnealingLR", o, cosineLR{tMax, etaMin})
}

type cosineLR struct {
	tMax   int
	etaMin float64
}

func (r cosineLR) next(s *LRScheduler, lrs []float64) []float64 {
	if s.initial {
		return lrs
	}
	t, e := float64(r.tMax), float64(s.epoch)
	out := make([]float64, len(lrs))
	for i, lr := range lrs {
		if (s.epoch-1-r.tMax)%(2*r.tMax) == 0 {
			// The ratio below would divide by 1 + cos π = 0.
			out[i] = lr + (s.base[i]-r.etaMin)*(1-math.Cos(math.Pi/t))/2
			continue
		}
		out[i] = (1+math.Cos(math.Pi*e/t))/(1+math.Cos(math.Pi*(e-1)/t))*(lr-r.etaMin) + r.etaMin
	}
	return out
}

func (r cosineLR) closed(s *LRScheduler) []float64 {
	f := (1 + math.Cos(math.Pi*float64(s.epoch)/float64(r.tMax))) / 2
	out := make([]float64, len(s.base))
	for i, b := range s.base {
		out[i] = r.etaMin + (b-r.etaMin)*f
	}
	return out
}

// NewLambdaLR sets each learning rate to its base times f(epoch)
// (torch.optim.lr_scheduler.LambdaLR with one function for every group): any
// schedule. f must not return a negative factor.
func NewLambdaLR(o Optimizer, f func(epoch int) float64) (*LRScheduler, error) {
	if f == nil {
		return nil, fmt.Errorf("optim: LambdaLR: nil function")
	}
	return newScheduler("LambdaLR", o, lambdaLR{f})
}

type lambdaLR struct{ f func(int) float64 }

func (r lambdaLR) next(s *LRScheduler, _ []float64) []float64 { return r.closed(s) }

func (r lambdaLR) closed(s *LRScheduler) []float64 { return scaled(s.base, r.f(s.epoch)) }

// SequentialLR runs schedules one after another (torch.optim.lr_scheduler.SequentialLR):
// schedule k from milestone k−1 on, restarted at its epoch 0 there. The classic use is
// a LinearLR warm-up then a CosineAnnealingLR.
type SequentialLR struct {
	o          groups
	scheds     []*LRScheduler
	milestones []int
	epoch      int
	last       []float64
}

// NewSequentialLR makes the sequence of scheds (made on o, in the order given) switching
// at the increasing milestones, one fewer than scheds. As PyTorch's, it sets the
// groups' learning rates back to their initial rates, undoes the first step of every
// schedule, and runs the first one's again.
func NewSequentialLR(o Optimizer, scheds []*LRScheduler, milestones []int) (*SequentialLR, error) {
	g, ok := o.(groups)
	switch {
	case !ok:
		return nil, fmt.Errorf("optim: SequentialLR: the optimizer is a %T; schedulers drive this package's optimizers", o)
	case len(scheds) == 0:
		return nil, fmt.Errorf("optim: SequentialLR: no schedulers")
	case len(milestones) != len(scheds)-1:
		return nil, fmt.Errorf("optim: SequentialLR: %d schedulers and %d milestones; give one milestone fewer than schedulers",
			len(scheds), len(milestones))
	}
	for i, s := range scheds {
		if s == nil || s.o != g {
			return nil, fmt.Errorf("optim: SequentialLR: scheduler %d does not belong to the optimizer", i)
		}
	}
	for i := 1; i < len(milestones); i++ {
		if milestones[i] <= milestones[i-1] {
			return nil, fmt.Errorf("optim: SequentialLR: milestones %v: they must increase", milestones)
		}
	}
	q := &SequentialLR{o: g, scheds: slices.Clone(scheds), milestones: slices.Clone(milestones)}
	for i, lr := range g.schedule().initialLR {
		g.SetLR(i, lr)
	}
	for _, s := range q.scheds {
		s.epoch--
	}
	q.scheds[0].initialStep()
	q.last = q.scheds[0].LastLR()
	return q, nil
}

func (q *SequentialLR) optimizer() groups { return q.o }

// Step advances the active schedule, or starts the next one at its milestone.
func (q *SequentialLR) Step() {
	q.epoch++
	k := sort.SearchInts(q.milestones, q.epoch+1) // bisect_right
	s := q.scheds[k]
	if k > 0 && q.milestones[k-1] == q.epoch {
		s.restart()
	} else {
		s.Step()
	}
	q.last = s.LastLR()
}

// LastLR returns the learning rates the last Step set.
func (q *SequentialLR) LastLR() []float64 { return slices.Clone(q.last) }

// ChainedScheduler steps several schedulers of one optimizer at once
// (torch.optim.lr_scheduler.ChainedScheduler): their chainable forms multiply.
type ChainedScheduler struct {
	scheds []Scheduler
	last   []float64
}

// NewChainedScheduler chains scheds, which must drive one optimizer.
func NewChainedScheduler(scheds ...Scheduler) (*ChainedScheduler, error) {
	if len(scheds) == 0 {
		return nil, fmt.Errorf("optim: ChainedScheduler: no schedulers")
	}
	for i, s := range scheds {
		if s == nil || s.optimizer() != scheds[0].optimizer() {
			return nil, fmt.Errorf("optim: ChainedScheduler: scheduler %d drives another optimizer than scheduler 0", i)
		}
	}
	c := &ChainedScheduler{scheds: slices.Clone(scheds)}
	c.last = c.lrs()
	return c, nil
}

func (c *ChainedScheduler) optimizer() groups { return c.scheds[0].optimizer() }

func (c *ChainedScheduler) lrs() []float64 { return lrsOf(c.optimizer()) }

// Step steps every scheduler in order.
func (c *ChainedScheduler) Step() {
	for _, s := range c.scheds {
		s.Step()
	}
	c.last = c.lrs()
}

// LastLR returns the learning rates the last Step set.
func (c *ChainedScheduler) LastLR() []float64 { return slices.Clone(c.last) }

// optional is the value of the optional argument name of op: def when none is given,
// the one given, or an error for more than one.
func optional(op, name string, def float64, given []float64) (float64, error) {
	switch len(given) {
	case 0:
		return def, nil
	case 1:
		return given[0], nil
	}
	return 0, fmt.Errorf("optim: %s: %d values of %s; pass one, or none for PyTorch's default %g", op, len(given), name, def)
}
