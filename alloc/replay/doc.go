// Package replay reads, writes, generates and replays allocation traces: the sequences of
// alloc/free/empty_cache events that the caching allocator is checked against PyTorch with.
//
// # Use
//
//	events, err := replay.ReadFile("run.jsonl.gz")        // recorded by alloc/recorder, or Generate(kind, seed)
//	res, err := replay.Replay(a, events, true)            // through an allocator; res.Final is memory_stats()
//	final, err := replay.OnSim(events, "expandable_segments:True", 0, 0) // the quick "what if" on a simulated H200
//
// `sublet replay`, `sublet trace gen` and `sublet trace info` are the same from the
// command line.
//
// A trace is JSONL, one event per line, exactly what the oracle script
// (bench/torch/torch_replay.py) reads:
//
//	{"op":"alloc","id":N,"size":B}     optional "stream":S (a trace-local stream number, 0 = default)
//	                                   and "lifetime":L (alloc.Lifetime's name: the hint the
//	                                   planned policy places the block by; torch_replay.py
//	                                   ignores it, as PyTorch's policy does)
//	{"op":"free","id":N}
//	{"op":"empty_cache"}
//
// Invariants of every []Event this package returns or accepts:
//   - Event i is line i+1 of its file: the reader accepts no blank lines, no comments, no
//     fields beyond those above and no non-integer numbers.
//   - Ids are live between their alloc and their free: an alloc names an id that is not
//     live, a free names one that is. Ids may be reused after their free. Liveness here is
//     the trace's; at replay an alloc that ends in OOM leaves its id not live, and the
//     trace's later free of it is skipped (as torch_replay.py does).
//   - Sizes are > 0 bytes; ids and streams are >= 0.
//
// Generators are deterministic functions of (kind, seed) built on this package's own
// random number generator, so a trace regenerates byte for byte on any Go version.
package replay
