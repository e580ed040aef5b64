package checkpoint_test

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// A forward under SaveOnCPU leaves on the (simulated) GPU only the parameters, the
// input, the result and the loss (536616 + 65536 + 2560 + 4 bytes); what the backward
// needs waits in host memory until it runs: the five 64×256 activations the Linears
// and ReLUs save and the two weights the second and third Linear save (256 KiB, and
// 10 KiB in a 16 KiB block).
func ExampleSaveOnCPU() {
	gpu, _ := sim.New(sim.Options{Capacity: 1 << 30, Backing: true})
	al, _ := alloc.For(gpu)
	onDevice := func() int64 { return al.Stats().RequestedBytes[alloc.StatAll].Current }
	host, _ := pinned.New(gpu)
	m := nn.NewMLP(nn.Init{Device: gpu, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{256, 256, 256, 10}})
	fmt.Println("parameters:", onDevice())

	root := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(2)))
	s := checkpoint.SaveOnCPU(root, host)
	x := s.Randn(gpu, dtype.F32, 64, 256)
	loss := m.Forward(x).Sum()
	fmt.Println("device after the forward:", onDevice(), "host blocks:", host.Stats().ActiveRequests.Current,
		"bytes:", host.Stats().ActiveBytes.Current)
	loss.Backward()
	fmt.Println("host blocks after the backward:", host.Stats().ActiveRequests.Current)
	root.Close()
	m.Release()
	host.Close()
	fmt.Println("device at the end:", onDevice())
	// Output:
	// parameters: 536616
	// device after the forward: 604716 host blocks: 7 bytes: 606208
	// host blocks after the backward: 0
	// device at the end: 0
}
