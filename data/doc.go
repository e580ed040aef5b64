// Package data feeds training loops: a Sampler decides which samples form each batch of
// an epoch, and a Loader collates them from a Dataset into host memory, prefetches
// batches on a goroutine and moves them to the device (torch.utils.data's DataLoader,
// kept small).
// docs/pytorch.md maps the PyTorch calls a user reaches for to sublet's.
//
//	ld, err := data.NewLoader(ds, data.Shuffle{N: ds.Len(), Batch: 64, Seed: 1},
//		data.Config{Device: dev, Prefetch: 2, Pinned: host})
//	it := ld.Epoch(0)
//	defer it.Close()
//	for {
//		b, err := it.Next()
//		if err != nil || b == nil {
//			break // err is the loader's failure; nil, nil is the end of the epoch
//		}
//		s := tensor.NewScope()
//		loss := trainStep(s.Bind(b.X), s.Bind(b.Y)) // a step's inputs belong to its scope
//		s.Close()
//		b.Release()
//	}
//
// # Collating and copying
//
// Each batch is collated into one host buffer: the Dataset writes every sample's
// features straight into its row (Dataset.Sample), and the labels follow the features,
// so collating copies each value once and the batch reaches the device in one copy per
// tensor. With Config.Pinned the buffers come from a pinned-host caching allocator
// (package alloc/pinned) and are reused from batch to batch; without it each batch gets
// new Go slices, as PyTorch's default collate makes new tensors.
//
// When the device offers pinned memory (device.PinnedHost, a GPU) and the allocator's
// memory is page-locked, the copies are asynchronous: the loader orders them on a copy
// stream of its own and records an event after them, and Next waits for that event, so
// the copy of a batch runs while the consumer's work on the batches before it does.
// Before ordering them the loader waits for the work already queued on the default
// stream, where tensor ops run: the blocks the new tensors were given may have been
// freed by that work, which may still read them (with Prefetch 2 or more the loader is
// ahead, and that wait costs the overlap nothing). The host
// buffer goes back to the pinned allocator with the stream recorded (RecordEvent), which
// keeps it from reuse until the copy has completed. Elsewhere (cpu, sim, or pageable
// memory) the copy is made by tensor.FromSlice and the buffer is free once it returns.
//
// # Invariants
//
//   - Every sample the sampler lists for an epoch arrives exactly once, in the
//     sampler's order, unless the epoch is closed early or fails.
//   - With Prefetch p the loader holds at most p+1 batches on the device that Next has
//     not returned yet: p waiting and one being made. Each needs its host buffer only
//     until its copy has completed.
//   - A Batch's tensors belong to the caller from Next on: no scope owns them, and
//     Batch.Release gives their memory back. Close releases every batch the consumer
//     did not receive, after its copy completed, and stops the goroutine; the device
//     and host allocators then hold nothing of the epoch but what the consumer kept.
//   - An error of the dataset, the device or the allocators (out of memory) ends the
//     epoch: Next returns it, and every later Next returns it again.
//
// An Iter is used by one goroutine at a time (the consumer); the loader's own
// goroutine touches nothing the consumer sees until it hands a batch over.
//
//doccheck:context var ds data.Dataset
//doccheck:context var host *pinned.Allocator
//doccheck:context var trainStep func(x, y *tensor.Tensor) float64
package data
