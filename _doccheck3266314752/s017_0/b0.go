package p

import (
	dist "github.com/subletml/sublet/dist"
	fmt "fmt"
	named "github.com/subletml/sublet/device/named"
	nn "github.com/subletml/sublet/nn"
)

func _() {
{
//line dist/doc.go:14
g, err := dist.InitFromEnv()           // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT:
                                       // the rendezvous, every rank connects to rank 0
defer g.Close()
dev, err := named.Open(fmt.Sprintf("cuda:%d", g.LocalRank())) // or "cpu"
b, err := dist.NewBackend(g, dev)      // NCCL on cuda, the CPU backend otherwise
defer b.Close()
dp, err := dist.NewDataParallel(model, b, dist.DataParallelConfig{}) // rank 0's parameters everywhere
defer dp.Release()
sampler, err := dist.NewSampler(n, g.Rank(), g.WorldSize(), dist.SamplerConfig{Shuffle: true, Seed: 1})
for epoch := range epochs {
	for _, batch := range batches(sampler.Indices(epoch)) { // this rank's samples
		x, y := load(batch)                                        // in a step scope
		loss := nn.CrossEntropyLoss{}.Loss(dp.Forward(x), y)
		loss.Backward()                  // returns with the gradients averaged over the ranks
		opt.Step()                       // the same step on every rank
		opt.ZeroGrad(true)
	}
}
}
}
