package device

// Graph is an executable graph of device work recorded by GraphCapturer.EndCapture.
type Graph uintptr

// GraphCapturer is implemented by devices that can record the work ordered on a stream
// into a graph instead of running it, and replay that graph later with one call (CUDA
// graphs). A replay runs the recorded kernels and copies on the very addresses and with
// the very arguments they were recorded with: whatever the recorded work reads must hold
// the replay's inputs, and whatever it writes stays where it was (tensor.CaptureGraph
// is the way to use it with tensors; it keeps those addresses alive).
type GraphCapturer interface {
	// BeginCapture starts recording the work later ordered on s, a stream from
	// NewStream (the default stream cannot be captured). Until EndCapture nothing
	// ordered on s runs, and nothing may wait for s from the host.
	BeginCapture(s Stream) error
	// EndCapture stops recording s and returns the recorded work, ready to launch. A
	// capture that something invalidated (a host wait on s, an unsupported call) gives
	// an error and no graph; s can be captured again afterwards.
	EndCapture(s Stream) (Graph, error)
	// LaunchGraph orders one run of g on s (any stream, the default one included).
	LaunchGraph(g Graph, s Stream) error
	// DestroyGraph frees g. Runs already ordered still complete.
	DestroyGraph(g Graph) error
}
