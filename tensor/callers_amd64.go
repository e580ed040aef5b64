package tensor

// callers writes into pcs the return addresses of the calling goroutine's frames from
// the caller of the function that calls it outwards, and returns how many it wrote.
// runtime.CallersFrames symbolizes them (expanding the frames inlined at each); the
// package's own frames at the top are dropped when a site is printed (frames).
//
// Every op records where its handles were made: runtime.Callers takes about 250 ns for
// 16 frames (its unwinder reads the tables of every frame), following the frame
// pointers (callers_amd64.s) about 20. Elsewhere it is runtime.Callers.
//
//go:noescape
func callers(pcs []uintptr) int
