// Package dist is data-parallel training across processes: a process group formed by
// a TCP rendezvous from torchrun's environment, collectives on tensors (NCCL on GPUs, a
// CPU backend elsewhere), a DataParallel wrapper that averages gradients as backward
// produces them (PyTorch's DistributedDataParallel), a Sampler that gives each rank its
// share of the data (DistributedSampler), and Launch, the launcher behind
// `sublet run -nproc N PROGRAM ARGS`.
// docs/pytorch.md maps the PyTorch calls a user reaches for to sublet's.
//
// # Use
//
// Start one process per rank (per GPU) with `sublet run -nproc N ./program` (or
// torchrun); each one does:
//
//	g, err := dist.InitFromEnv()           // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT:
//	                                       // the rendezvous, every rank connects to rank 0
//	defer g.Close()
//	dev, err := named.Open(fmt.Sprintf("cuda:%d", g.LocalRank())) // or "cpu"
//	b, err := dist.NewBackend(g, dev)      // NCCL on cuda, the CPU backend otherwise
//	defer b.Close()
//	dp, err := dist.NewDataParallel(model, b, dist.DataParallelConfig{}) // rank 0's parameters everywhere
//	defer dp.Release()
//	sampler, err := dist.NewSampler(n, g.Rank(), g.WorldSize(), dist.SamplerConfig{Shuffle: true, Seed: 1})
//	for epoch := range epochs {
//		for _, batch := range batches(sampler.Indices(epoch)) { // this rank's samples
//			x, y := load(batch)                                        // in a step scope
//			loss := nn.CrossEntropyLoss{}.Loss(dp.Forward(x), y)
//			loss.Backward()                  // returns with the gradients averaged over the ranks
//			opt.Step()                       // the same step on every rank
//			opt.ZeroGrad(true)
//		}
//	}
//
// N ranks with a batch of B each train as one process with a batch of N·B: the same
// parameters within float tolerance, and the same bits on every rank. dp.NoSync(f) runs
// backwards that only accumulate (gradient accumulation). Backend's collectives
// (AllReduce, Broadcast, AllGather, ReduceScatter, GroupStart/GroupEnd, Abort) are there
// for anything else; examples/ddp is a whole program.
//
// # Invariants
//
//   - Every rank issues the same collectives in the same order; a group runs them one at
//     a time. Rank 0 checks that each is the same on every rank (operation, type, count,
//     root, reduction) and fails all ranks with ErrMismatch when not.
//   - Every collective is bounded by the timeout (Config.Timeout, SUBLET_DIST_TIMEOUT,
//     DefaultTimeout): a rank that dies (ErrPeerGone), hangs (ErrTimeout) or aborts
//     (ErrAborted) makes every other rank's collective fail within it with an *Error
//     naming that rank, never hang; rank 0 relays the cause to the others. The first
//     failure breaks the group (and the backend) for good: later collectives fail with
//     it at once.
//   - The CPU backend's reductions are deterministic (rank order, at rank 0) and every
//     rank receives the same bytes; it reads and writes tensor elements only through
//     the public tensor API, in one file (cpudata.go).
//   - DataParallel's buckets are tensors from the parameters' caching allocator,
//     allocated once by NewDataParallel and released by Release: between steps the
//     allocator holds the parameters, the buckets and the optimizer's state, exactly.
//     Its hooks stay on the parameters (tensor has no way to remove one) and do nothing
//     once it is released.
//   - Bad settings are errors wrapping ErrConfig or ErrRendezvous that name the
//     variable, the value and what to do.
//
// The NCCL backend needs libnccl.so.2 (2.23 or later) at run time, loaded through
// package dist/nccl with purego: the package builds with CGO_ENABLED=0, and a machine
// without NCCL gets an error wrapping ErrBackend naming what is missing. `sublet run`
// sets NCCL_NVLS_ENABLE=0 in every process it starts.
//
//doccheck:context var n int
//doccheck:context var batches func(indices []int) [][]int
//doccheck:context var load func(batch []int) (x, y *tensor.Tensor)
package dist
