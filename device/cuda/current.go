package cuda

// MakeCurrent makes the GPU's primary context current on the calling OS thread, for
// libraries that use the CUDA runtime from that thread (NCCL, cuBLAS), which find their
// device through the current context. The caller must have locked its goroutine to its
// thread (runtime.LockOSThread) and keep it locked while it calls them: the context
// stays current on the thread until something else changes it.
func (d *Device) MakeCurrent() error {
	if r := syscallN(d.drv.cuCtxSetCurrent, d.ctxArgs...); r != success {
		return d.drv.errorf(r, "cuCtxSetCurrent(%s)", d.name)
	}
	return nil
}
