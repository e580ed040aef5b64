package optim

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// StateDict is an optimizer's state laid out as PyTorch's Optimizer.state_dict():
// what package safetensors saves and loads, and what torch.optim.Optimizer.
// load_state_dict takes once the tensors are grouped by parameter.
type StateDict struct {
	// Kind is the optimizer: "SGD", "Adam" or "AdamW".
	Kind string
	// State holds, for each parameter with state, by its index in Params, its state
	// tensors under PyTorch's names: "momentum_buffer" (SGD with momentum);
	// "exp_avg", "exp_avg_sq" and "step" (Adam and AdamW; step is a one-element F32
	// tensor, as PyTorch keeps it).
	State map[int]map[string]*tensor.Tensor
	// Groups are the param_groups: each group's hyper-parameters under PyTorch's names
	// ("lr", "momentum", "betas", "weight_decay", …; "initial_lr" once a scheduler
	// was made) and "params", the indices of its parameters. Values are what
	// encoding/json gives: float64, bool, []any.
	Groups []map[string]any
}

// StateDict returns the optimizer's state. The state tensors are handles owned by s
// over the optimizer's own tensors (they change with the next Step; Close s when done
// with them); the step counts are new tensors of s.
func (o *SGD) StateDict(s *tensor.Scope) StateDict {
	d := StateDict{Kind: "SGD", State: o.stateTensors(s, "momentum_buffer")}
	for i, c := range o.groups {
		d.Groups = append(d.Groups, o.group(i, map[string]any{"lr": c.LR, "momentum": c.Momentum, "dampening": c.Dampening,
			"weight_decay": c.WeightDecay, "nesterov": c.Nesterov}))
	}
	return d
}

// StateDict returns the optimizer's state, as SGD's does.
func (o *Adam) StateDict(s *tensor.Scope) StateDict {
	d := StateDict{Kind: o.op, State: o.stateTensors(s, "exp_avg", "exp_avg_sq")}
	for i, st := range d.State {
		p := o.params.params[i]
		if counts := o.onDev[o.groupOf[i]].steps; counts != nil { // a copy on the device: nothing waits
			k := o.index(i)
			st["step"] = s.Empty(p.Device(), dtype.F32)
			st["step"].CopyFrom(s.Bind(counts).Slice(0, k, k+1).View())
			continue
		}
		st["step"] = s.Full(p.Device(), dtype.F32, float64(o.steps[i]))
	}
	for i, c := range o.groups {
		// decoupled_weight_decay: torch ≥ 2.6 reads it, and its AdamW loading a group
		// without it would decay as Adam does.
		d.Groups = append(d.Groups, o.group(i, map[string]any{"lr": c.LR, "betas": []any{c.Beta1, c.Beta2}, "eps": c.Eps,
			"weight_decay": c.WeightDecay, "amsgrad": false, "decoupled_weight_decay": o.decoupled, "capturable": c.Capturable}))
	}
	return d
}

// stateTensors binds every parameter's state tensors into s under names.
func (g *params) stateTensors(s *tensor.Scope, names ...string) map[int]map[string]*tensor.Tensor {
	out := map[int]map[string]*tensor.Tensor{}
	for i, st := range g.state {
		if len(st) != len(names) {
			continue
		}
		m := map[string]*tensor.Tensor{}
		for k, t := range st {
			m[names[k]] = s.Bind(t)
		}
		out[i] = m
	}
	return out
}

// group completes hyper-parameters h of group i with its parameters' indices and,
// once a scheduler was made, its initial learning rate.
func (g *params) group(i int, h map[string]any) map[string]any {
	var idx []any
	for _, j := range g.groupIndices(i) {
		idx = append(idx, float64(j))
	}
	h["params"] = idx
	if g.initialLR != nil {
		h["initial_lr"] = g.initialLR[i]
	}
	return h
}

// LoadStateDict replaces the optimizer's state and its groups' hyper-parameters by
// d's (torch.optim.Optimizer.load_state_dict): d must be of this kind of optimizer,
// with as many groups holding the same parameter indices, and state tensors of each
// parameter's shape on its device (F32). Parameters d has no state for lose theirs.
// Nothing changes when it returns an error.
func (o *SGD) LoadStateDict(d StateDict) error {
	cs := make([]SGDConfig, len(o.groups))
	err := o.checkDict("SGD", d, func(i int, h hyper) error {
		c := SGDConfig{LR: h.num("lr"), Momentum: h.num("momentum"), Dampening: h.num("dampening"),
			WeightDecay: h.num("weight_decay"), Nesterov: h.flag("nesterov")}
		if h.err == nil {
			h.err = c.check()
		}
		cs[i] = c
		return h.err
	}, "momentum_buffer")
	if err != nil {
		return err
	}
	o.groups = cs
	o.loadState(d, "momentum_buffer")
	return nil
}

// LoadStateDict replaces the optimizer's state and hyper-parameters, as SGD's does.
func (o *Adam) LoadStateDict(d StateDict) error {
	cs := make([]AdamConfig, len(o.groups))
	err := o.checkDict(o.op, d, func(i int, h hyper) error {
		b := h.pair("betas")
		c := AdamConfig{LR: h.num("lr"), Beta1: b[0], Beta2: b[1], Eps: h.num("eps"), WeightDecay: h.num("weight_decay"),
			Capturable: h.flag("capturable")}
		if h.flag("amsgrad") && h.err == nil {
			h.err = fmt.Errorf("amsgrad is not implemented")
		}
		if _, ok := h.m["decoupled_weight_decay"]; ok && h.flag("decoupled_weight_decay") != o.decoupled && h.err == nil {
			h.err = fmt.Errorf("decoupled_weight_decay is %v; this is %s", h.m["decoupled_weight_decay"], o.op)
		}
		if h.err == nil {
			h.err = c.check()
		}
		if h.err == nil {
			h.err = checkCapturable(c.Capturable, o.GroupParams(i))
		}
		cs[i] = c
		return h.err
	}, "exp_avg", "exp_avg_sq", "step")
	if err != nil {
		return err
	}
	steps := make([]int, len(o.steps))
	if err := tensor.Try(func() {
		for i, st := range d.State {
			v := st["step"].Item()
			if v < 0 || v != float64(int(v)) {
				panic(&tensor.Error{Op: o.op + ".LoadStateDict", Msg: fmt.Sprintf("parameter %d's step is %g, not a count", i, v), Err: tensor.ErrShape})
			}
			steps[i] = int(v)
		}
	}); err != nil {
		return fmt.Errorf("optim: %s.LoadStateDict: reading the step counts: %w", o.op, err)
	}
	o.groups, o.steps = cs, steps
	for i := range o.onDev { // made again from steps by the next Step
		o.onDev[i].release()
	}
	o.loadState(d, "exp_avg", "exp_avg_sq")
	return nil
}

// hyper reads a group's hyper-parameters, keeping the first error.
type hyper struct {
	m   map[string]any
	err error
}

func (h *hyper) num(k string) float64 {
	v, ok := h.m[k].(float64)
	if !ok && h.err == nil {
		h.err = fmt.Errorf("%q is %v, not a number", k, h.m[k])
	}
	return v
}

func (h *hyper) flag(k string) bool {
	v, ok := h.m[k]
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok && h.err == nil {
		h.err = fmt.Errorf("%q is %v, not a bool", k, v)
	}
	return b
}

func (h *hyper) pair(k string) [2]float64 {
	v, ok := h.m[k].([]any)
	var out [2]float64
	if !ok || len(v) != 2 {
		if h.err == nil {
			h.err = fmt.Errorf("%q is %v, not a pair of numbers", k, h.m[k])
		}
		return out
	}
	for i, x := range v {
		f, ok := x.(float64)
		if !ok && h.err == nil {
			h.err = fmt.Errorf("%q is %v, not a pair of numbers", k, h.m[k])
		}
		out[i] = f
	}
	return out
}

// checkDict checks d against the optimizer (kind, groups, their parameters, the state
// tensors named names of each parameter) and reads each group's hyper-parameters with
// read, returning the first problem.
func (g *params) checkDict(kind string, d StateDict, read func(i int, h hyper) error, names ...string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("optim: %s.LoadStateDict: "+format, append([]any{g.op}, args...)...)
	}
	if d.Kind != kind {
		return bad("the state is a %q optimizer's", d.Kind)
	}
	if len(d.Groups) != g.groups {
		return bad("%d parameter groups for %d", len(d.Groups), g.groups)
	}
	for i, grp := range d.Groups {
		want := g.group(i, map[string]any{})["params"]
		if got, _ := json.Marshal(grp["params"]); string(got) != mustJSON(want) {
			return bad("group %d holds parameters %s; this optimizer's holds %s", i, got, mustJSON(want))
		}
		if err := read(i, hyper{m: grp}); err != nil {
			return bad("group %d: %w", i, err)
		}
	}
	for i, st := range d.State {
		if i < 0 || i >= len(g.params) {
			return bad("state for parameter %d of %d", i, len(g.params))
		}
		p := g.params[i]
		for _, n := range names {
			t := st[n]
			if t == nil {
				return bad("parameter %d has no %q", i, n)
			}
			want := p.Shape()
			if n == "step" {
				want = nil
			}
			if t.Released() || t.DType() != dtype.F32 || !slices.Equal(t.Shape(), want) || t.Device() != p.Device() {
				return bad("parameter %d's %q is %v; want F32 %v on %s", i, n, t, want, p.Device().Name())
			}
		}
		if len(st) != len(names) {
			return bad("parameter %d has %d state tensors; want %v", i, len(st), names)
		}
	}
	if len(d.Groups) > 0 {
		if _, ok := d.Groups[0]["initial_lr"]; ok {
			for i, grp := range d.Groups {
				if _, ok := grp["initial_lr"].(float64); !ok {
					return bad("group %d has no initial_lr though group 0 has one", i)
				}
			}
		}
	}
	return nil
}

// loadState copies d's state tensors named names into the optimizer's state, making
// it where there is none and dropping it for parameters d has none for; then the
// initial learning rates.
func (g *params) loadState(d StateDict, names ...string) {
	for i := range g.params {
		st, ok := d.State[i]
		if !ok {
			for _, t := range g.state[i] {
				t.Release()
			}
			g.state[i] = nil
			continue
		}
		if len(g.state[i]) != len(names) {
			for _, t := range g.state[i] {
				t.Release()
			}
			g.state[i] = zerosLike(g.params[i], len(names))
		}
		for k, n := range names {
			g.state[i][k].CopyFrom(st[n])
		}
	}
	g.initialLR = nil
	if len(d.Groups) > 0 {
		if _, ok := d.Groups[0]["initial_lr"]; ok {
			for _, grp := range d.Groups {
				g.initialLR = append(g.initialLR, grp["initial_lr"].(float64))
			}
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("optim: internal error: %v", err))
	}
	return string(b)
}
