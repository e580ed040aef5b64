// Package dist is data-parallel training over several processes: a process group made
// by a TCP rendezvous, collectives on tensors (AllReduce, Broadcast, AllGather,
// ReduceScatter), DistributedDataParallel, a sampler that splits a data set among the
// ranks, and the launcher behind `sublet run` (torchrun's environment).
//
// # Use
//
// Start N processes with `sublet run -nproc N ./prog` (or torchrun); in each:
//
//	c, err := dist.ConfigFromEnv()                  // RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...
//	g, err := dist.Init(c)                          // every rank joins, or all fail
//	defer g.Close()
//	b := dist.NewCPU(g)                             // collectives over the group's connections
//	dp, err := dist.NewDataParallel(model, b, dist.DataParallelConfig{}) // every rank starts from rank 0's parameters
//	defer dp.Release()
//	smp, err := dist.NewSampler(n, g.Rank(), g.WorldSize(), dist.SamplerConfig{})
//	... each step: loss := lossOf(dp.Forward(x)); loss.Backward() // gradients averaged over the ranks
//	opt.Step()
//
// A program that starts its ranks itself (tests, goroutines of one process) fills in a
// Config instead of reading the environment.
//
// # Invariants
//
//   - Every rank issues the same collectives in the same order; the group runs them
//     one at a time, in that order, on a goroutine of its own. A collective's tensors
//     belong to the backend from the call until its Work's Wait returns.
//   - An argument that cannot work (a shape that does not fit, a device the backend
//     cannot read) is an error at once, on that rank only, and issues nothing. A
//     failure while a collective runs (a timeout, a rank gone, ranks that disagree,
//     Abort) breaks the group for good: every rank's Wait, and every later operation,
//     returns it, as an *Error naming the reporting rank and the rank at fault.
//   - Reductions on the CPU backend are deterministic: rank 0 combines the ranks'
//     elements in rank order and every rank receives the same bytes.
//   - After DataParallel's Backward every rank holds the same averaged gradients; its
//     buckets are device memory from the parameters' caching allocator, allocated by
//     NewDataParallel and released by Release.
//   - Config.Timeout (SUBLET_DIST_TIMEOUT; DefaultTimeout) bounds the rendezvous and
//     each collective: a hung rank is an error, never a hang.
package dist
