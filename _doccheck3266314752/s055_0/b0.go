package p

import (
	dist "github.com/subletml/sublet/dist"
	fmt "fmt"
	named "github.com/subletml/sublet/device/named"
)

func _() {
{
//line docs/distributed.md:46
g, err := dist.InitFromEnv()         // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
                                     // dist.Init(dist.Config{WorldSize: 1}) needs no network
defer g.Close()
dev, err := named.Open(fmt.Sprintf("cuda:%d", g.LocalRank())) // or "cpu"
b, err := dist.NewBackend(g, dev)    // NCCL for cuda, CPU otherwise
defer b.Close()
dp, err := dist.NewDataParallel(model, b, dist.DataParallelConfig{})
defer dp.Release()
sampler, err := dist.NewSampler(len(samples), g.Rank(), g.WorldSize(), dist.SamplerConfig{Shuffle: true, Seed: 1})
// each step, in a step scope: loss of dp.Forward(x); loss.Backward(); opt.Step(); opt.ZeroGrad(true)

}
}
