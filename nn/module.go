package nn

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Module is a layer, a container of layers, or a model.
type Module interface {
	// Forward computes the module on x, which a scope owns; the result belongs where
	// an op on x puts it: x's scope, or the step scope open in it (see the package
	// doc and tensor.ResultScope).
	Forward(x *tensor.Tensor) *tensor.Tensor
	// NamedParameters lists the parameters, children's first in order, each named by
	// its dotted path ("0.weight", "2.bias"), as PyTorch's named_parameters does.
	NamedParameters() []Parameter
	// SetTraining switches training mode (on) or evaluation mode (off).
	SetTraining(on bool)
	// Release releases every parameter and its gradient. Releasing again does nothing.
	Release()
}

// Parameter is a module's parameter and its dotted name.
type Parameter struct {
	Name   string
	Tensor *tensor.Tensor
}

// Parameters returns m's parameters, in NamedParameters' order (what an optimizer
// takes).
func Parameters(m Module) []*tensor.Tensor {
	named := m.NamedParameters()
	ps := make([]*tensor.Tensor, len(named))
	for i, p := range named {
		ps[i] = p.Tensor
	}
	return ps
}

// ParameterBytes is the size of m's parameters: the device memory they hold.
func ParameterBytes(m Module) int64 {
	var n int64
	for _, p := range m.NamedParameters() {
		n += p.Tensor.Bytes()
	}
	return n
}

// GradBytes is the size of the gradients m's parameters hold now (none after
// ZeroGrad(true)).
func GradBytes(m Module) int64 {
	var n int64
	for _, p := range m.NamedParameters() {
		if g := p.Tensor.Grad(); g != nil {
			n += g.Bytes()
		}
	}
	return n
}

// Init says where and how a module's parameters are made.
type Init struct {
	// Device holds the parameters.
	Device device.Device
	// DType is the parameters' element type; the zero value means F32.
	DType dtype.DType
	// Gen draws the random initial values (Linear, Embedding). Modules drawing from the
	// same generator consume its numbers in the order they are built.
	Gen *tensor.Generator
}

func (in Init) dtype() dtype.DType {
	if in.DType == dtype.Invalid {
		return dtype.F32
	}
	return in.DType
}

// Param makes a parameter of shape on Device, of DType, its elements set by fill
// (t.FillUniform(in.Gen, -b, b), t.Fill(1), …): a leaf that requires grad and belongs
// to no scope, for a *tensor.Tensor field of a module (see Base). It panics with a
// *tensor.Error when in has no Device; a fill that panics releases it first.
func (in Init) Param(fill func(t *tensor.Tensor), shape ...int) *tensor.Tensor {
	return in.parameter("nn.Init.Param", fill, shape...)
}

// parameter makes a parameter of shape, its elements set by fill. A NoGrad scope owns
// it until it becomes a parameter; a failing fill releases it with the scope.
func (in Init) parameter(module string, fill func(t *tensor.Tensor), shape ...int) *tensor.Tensor {
	if in.Device == nil {
		panic(&tensor.Error{Op: module, Msg: "nn.Init has no Device"})
	}
	s := tensor.NewScope(tensor.NoGrad(), tensor.WithLifetime(alloc.LifetimeParameter)) // the planned policy keeps it apart
	defer s.Close()
	t := s.Empty(in.Device, in.dtype(), shape...)
	fill(t)
	return t.AsParameter()
}

// generator returns in.Gen, which module needs to draw initial values.
func (in Init) generator(module string) *tensor.Generator {
	if in.Gen == nil {
		panic(&tensor.Error{Op: module, Msg: "nn.Init has no Gen to draw the initial values from"})
	}
	return in.Gen
}

// uniform makes a parameter of shape with values uniform in [-bound, bound).
func (in Init) uniform(module string, bound float64, shape ...int) *tensor.Tensor {
	g := in.generator(module)
	return in.parameter(module, func(t *tensor.Tensor) { t.FillUniform(g, -bound, bound) }, shape...)
}

// construct fills m's parameters with fill and returns m; if fill panics (out of memory
// for a later parameter) the parameters made so far are released before the panic goes
// on, so a failed constructor leaves nothing allocated.
func construct[M Module](m M, fill func(m M)) M {
	done := false
	defer func() {
		if !done {
			m.Release()
		}
	}()
	fill(m)
	done = true
	return m
}

// releaseAll releases the parameters ps.
func releaseAll(ps ...*tensor.Tensor) {
	for _, p := range ps {
		if p != nil {
			p.Release()
		}
	}
}

// prefixed returns ps with their names prefixed by prefix and a dot.
func prefixed(prefix string, ps []Parameter) []Parameter {
	out := make([]Parameter, len(ps))
	for i, p := range ps {
		out[i] = Parameter{Name: fmt.Sprintf("%s.%s", prefix, p.Name), Tensor: p.Tensor}
	}
	return out
}
