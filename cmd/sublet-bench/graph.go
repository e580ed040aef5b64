package main

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/profiler"
	"github.com/subletml/sublet/tensor"
)

// hostBatch is a train case's batch in pinned host memory, where the device has it:
// what a data loader with pinned memory hands a GPU step.
type hostBatch struct {
	pin *pinned.Allocator
	// x and labels are the batch's bytes in pinned memory; nil where the device has no
	// pinned memory (the steps then upload from the Go slices).
	x, labels []byte
}

func newHostBatch(dev device.Device, x []float32, labels []int64) (*hostBatch, error) {
	b := &hostBatch{}
	if _, ok := dev.(device.PinnedHost); !ok || dev.Residency() == device.Meta {
		return b, nil
	}
	var err error
	if b.pin, err = pinned.New(dev); err != nil {
		return nil, err
	}
	for _, src := range [][]byte{
		unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x)),
		unsafe.Slice((*byte)(unsafe.Pointer(&labels[0])), 8*len(labels)),
	} {
		buf, err := b.pin.Alloc(int64(len(src)))
		if err != nil {
			return nil, errors.Join(err, b.close())
		}
		copy(buf, src)
		if b.x == nil {
			b.x = buf
		} else {
			b.labels = buf
		}
	}
	return b, nil
}

// close gives the pinned memory back; the device has finished every copy from it (the
// steps read their loss).
func (b *hostBatch) close() error {
	if b.pin == nil {
		return nil
	}
	return errors.Join(b.pin.Free(b.x), b.pin.Free(b.labels), b.pin.Close())
}

// captureStep records one training step of c as a graph, after the warm-up (the
// parameters have no gradients and the optimizer has its state), and returns it with a
// step that replays it and reads the loss, as an eager step does. With the batch
// uploaded each step the graph copies it from the pinned batch into inputs made here.
func captureStep(dev device.Device, c trainCase, forward func(*tensor.Tensor) *tensor.Tensor, opt optim.Optimizer,
	data *tensor.Scope, xr, lr *tensor.Tensor, batch *hostBatch) (*tensor.Graph, func(*profiler.Profiler) error, error) {
	if c.autocast != dtype.Invalid {
		return nil, nil, fmt.Errorf("%s: a GradScaler's step reads its inf check back on the host, which a graph cannot record", c.name)
	}
	xs, ls := xr, lr
	if xs == nil {
		if batch.x == nil {
			return nil, nil, fmt.Errorf("%s: a graph uploads its batch from pinned memory, which %s does not have", c.name, dev.Name())
		}
		if err := tensor.Try(func() {
			xs, ls = data.Empty(dev, dtype.F32, c.batch, c.widths[0]), data.Empty(dev, dtype.I64, c.batch)
		}); err != nil {
			return nil, nil, err
		}
	}
	var loss *tensor.Tensor
	g, err := tensor.CaptureGraph(dev, func() {
		if xr == nil {
			xs.SetBytes(batch.x)
			ls.SetBytes(batch.labels)
		}
		s := data.Child()
		defer s.Close()
		l := nn.CrossEntropyLoss{}.Loss(forward(s.Bind(xs)), s.Bind(ls))
		l.Backward()
		opt.Step()
		opt.ZeroGrad(true)
		loss = s.Keep(l)
	})
	if err != nil {
		return nil, nil, err
	}
	replay := func(*profiler.Profiler) error {
		if err := g.Replay(); err != nil {
			return err
		}
		return tensor.Try(func() { loss.Item() })
	}
	return g, replay, nil
}
