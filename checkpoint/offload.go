package checkpoint

import (
	"errors"
	"fmt"
	"slices"

	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// SaveOnCPU returns a child scope of parent in which every tensor an op saves for
// backward is kept in host memory from host instead of device memory
// (torch.autograd.graph.save_on_cpu(pin_memory=True)): the saved-tensor hooks of the
// scope copy each saved tensor into a block of host and release the device copy; the
// backward that needs it copies it back into a new device tensor, released once the
// op that read it has run. host is the pinned host allocator of the device the
// tensors are on (pinned.New(dev)): page-locked memory on a GPU, where both copies are
// asynchronous on stream 0 and the blocks wait for them before they are reused; plain
// host memory on a simulated device. Tensors on the cpu device are kept as they are,
// as PyTorch keeps CPU tensors.
//
// After a recorded forward in the scope, the device holds none of the activations the
// graph saved (the parameters, the inputs and the results stay where they are); host
// holds one block per saved tensor (its ActiveRequests), given back when the graph
// releases the tensor. As in PyTorch, every saved tensor is offloaded, the parameters
// an op saves (Linear's weight, for its input's gradient) included, and a tensor saved
// by two ops is copied twice. Nested saved-tensor hooks follow the package's rule:
// a Checkpoint inside keeps its inputs through these hooks, so they go to host memory
// too. Close host only after the graphs that saved through it are released.
func SaveOnCPU(parent *tensor.Scope, host *pinned.Allocator) *tensor.Scope {
	if host == nil {
		panic(&tensor.Error{Op: "checkpoint.SaveOnCPU", Msg: "nil host allocator; make one with pinned.New(dev)", Err: tensor.ErrScope})
	}
	return parent.Child(tensor.WithSavedHooks(offload{host}))
}

// offload is the saved-tensor hooks of a SaveOnCPU scope.
type offload struct{ host *pinned.Allocator }

// onHost is a saved tensor in host memory: a block of the host allocator holding its
// elements, row-major.
type onHost struct {
	host  *pinned.Allocator
	buf   []byte // nil for a tensor without elements
	dev   device.Device
	dt    dtype.DType
	shape []int
}

// Pack copies v to host memory and releases it; a tensor on the cpu device is kept.
func (o offload) Pack(v autograd.Value) (autograd.Value, error) {
	t, ok := v.(*tensor.Tensor)
	if !ok {
		v.Release()
		return nil, fmt.Errorf("checkpoint: SaveOnCPU: a saved value of type %T; the tensor package saves *tensor.Tensor", v)
	}
	if t.Device().Kind() == device.CPU {
		return t, nil
	}
	defer t.Release()
	if d := o.host.Device(); t.Device() != d {
		return nil, fmt.Errorf("checkpoint: SaveOnCPU: a tensor %v on %s was saved, but the host allocator serves %s; "+
			"use one SaveOnCPU scope per device", t.Shape(), t.Device().Name(), d.Name())
	}
	buf, err := o.host.Alloc(t.Bytes())
	if err != nil {
		return nil, fmt.Errorf("checkpoint: SaveOnCPU: host memory for a saved tensor %v %v: %w", t.Shape(), t.DType(), err)
	}
	p := &onHost{host: o.host, buf: buf, dev: t.Device(), dt: t.DType(), shape: t.Shape()}
	var recorded error
	if err := tensor.Try(func() {
		if t.CopyToHost(buf) && buf != nil {
			recorded = o.host.RecordEvent(buf, 0) // the block waits for the copy before its reuse
		}
	}); err != nil || recorded != nil {
		p.Release()
		return nil, fmt.Errorf("checkpoint: SaveOnCPU: copying a saved tensor %v to host memory: %w", p.shape, errors.Join(err, recorded))
	}
	return p, nil
}

// Unpack copies p back to a new tensor on its device (a tensor kept as it was comes
// back as a new handle).
func (o offload) Unpack(p autograd.Value) (autograd.Value, error) {
	tmp := tensor.NewScope(tensor.NoGrad())
	defer tmp.Close()
	var out *tensor.Tensor
	err := tensor.Try(func() {
		switch p := p.(type) {
		case *tensor.Tensor:
			out = tmp.Keep(tmp.Bind(p))
		case *onHost:
			out = tmp.Keep(tensor.FromBytes(tmp, p.dev, p.dt, p.buf, p.shape...))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: SaveOnCPU: copying a saved tensor back: %w", err)
	}
	if out == nil {
		return nil, fmt.Errorf("checkpoint: SaveOnCPU: unpack: %T is not what SaveOnCPU packed", p)
	}
	return out, nil
}

// Release gives the block back; it waits for the copies that used it (RecordEvent)
// before it is reused.
func (p *onHost) Release() {
	if p.buf == nil {
		return
	}
	b := p.buf
	p.buf = nil
	if err := p.host.Free(b); err != nil {
		panic(fmt.Sprintf("checkpoint: SaveOnCPU: giving back the host block of a saved tensor %v: %v "+
			"(close the host allocator only after the graphs that saved through it are released)", slices.Clone(p.shape), err))
	}
}
