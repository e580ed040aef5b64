package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
)

// BLASEnv names the cuBLAS library to load: a path or soname, or "off" for none (the
// products then run on the built-in fallback kernel). Unset: the sonames .13, .12 and
// .11, then the CUDA and Python-wheel folders (see blasCandidates).
const BLASEnv = "SUBLET_CUBLAS"

// WorkspaceEnv is PyTorch's variable for the cuBLAS workspace: ":SIZE_KIB:COUNT"
// pairs, summed (":4096:8" is 32 MiB; ":0:0" none).
const WorkspaceEnv = "CUBLAS_WORKSPACE_CONFIG"

// blasLib is the process's cuBLAS: loaded on first use, immutable after.
type blasLib struct {
	lib                                                   *cudadev.Library
	version                                               string // "11.11.3"
	create, destroy, setStream, setWorkspace, setMathMode uintptr
	gemmEx, gemmStridedBatchedEx                          uintptr
}

var loadedBLAS = sync.OnceValues(loadBLAS)

// BLAS reports the cuBLAS library products use ("libcublas.so.12 (cuBLAS 12.4.5)"),
// or why there is none (then they run on the fallback kernel): for `sublet info`.
func BLAS() (string, error) {
	l, err := loadedBLAS()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (cuBLAS %s)", l.lib.Path(), l.version), nil
}

// ErrNoBLAS is wrapped by BLAS's error when cuBLAS is off or not found.
var ErrNoBLAS = errors.New("no cuBLAS")

func loadBLAS() (*blasLib, error) {
	cands, err := blasCandidates()
	if err != nil {
		return nil, err
	}
	lib, err := cudadev.OpenLibrary(cands...)
	if err != nil {
		return nil, fmt.Errorf("kernels/cuda: %w (set %s to its path): %w", ErrNoBLAS, BLASEnv, err)
	}
	l := &blasLib{lib: lib}
	var getProperty uintptr
	for _, s := range []struct {
		fn   *uintptr
		name string
	}{
		{&l.create, "cublasCreate_v2"},
		{&l.destroy, "cublasDestroy_v2"},
		{&l.setStream, "cublasSetStream_v2"},
		{&l.setWorkspace, "cublasSetWorkspace_v2"},
		{&l.setMathMode, "cublasSetMathMode"},
		{&l.gemmEx, "cublasGemmEx"},
		{&l.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx"},
		{&getProperty, "cublasGetProperty"},
	} {
		if *s.fn, err = lib.Symbol(s.name); err != nil {
			return nil, fmt.Errorf("kernels/cuda: %w: %w (cuBLAS 11.4 or later is needed)", ErrNoBLAS, err)
		}
	}
	// cublasGetProperty(MAJOR_VERSION 0, MINOR 1, PATCH_LEVEL 2) needs no GPU.
	var v [3]int32
	for i := range v {
		if st := int64(int32(lib.CallNoContext(getProperty, uintptr(i), uintptr(unsafe.Pointer(&v[i]))))); st != cublasStatusSuccess {
			return nil, fmt.Errorf("kernels/cuda: %s: cublasGetProperty: %s", lib.Path(), blasStatus(st))
		}
	}
	l.version = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
	return l, nil
}

// blasCandidates lists what loadBLAS tries, in order.
func blasCandidates() ([]string, error) {
	switch env := os.Getenv(BLASEnv); env {
	case "":
	case "off":
		return nil, fmt.Errorf("kernels/cuda: %w: %s=off", ErrNoBLAS, BLASEnv)
	default:
		return []string{env}, nil
	}
	sonames := []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}
	c := slices.Clone(sonames)
	var dirs []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(v); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	versioned, _ := filepath.Glob("/usr/local/cuda-*/lib64")
	slices.Reverse(versioned) // the newest toolkit first
	dirs = append(dirs, versioned...)
	// Python wheels: torch's cu13 wheels put cuBLAS in nvidia/cu13/lib, cu12 in
	// nvidia/cublas/lib, under each site-packages.
	var prefixes []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(v); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		prefixes = append(prefixes, filepath.Join(h, ".local"))
	}
	prefixes = append(prefixes, "/usr/local", "/usr")
	opt, _ := filepath.Glob("/opt/*") // conda, virtual environments
	prefixes = append(prefixes, opt...)
	for _, p := range prefixes {
		for _, site := range []string{"site-packages", "dist-packages"} {
			for _, sub := range []string{"nvidia/cu13/lib", "nvidia/cublas/lib"} {
				found, _ := filepath.Glob(filepath.Join(p, "lib", "python3*", site, sub))
				dirs = append(dirs, found...)
			}
		}
	}
	for _, d := range dirs {
		for _, so := range sonames {
			if f := filepath.Join(d, so); fileExists(f) {
				c = append(c, f)
			}
		}
	}
	return c, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// blasStatus names a cublasStatus_t (cublas_api.h).
func blasStatus(st int64) string {
	names := map[int64]string{
		0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
		7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
		13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
		16: "CUBLAS_STATUS_LICENSE_ERROR",
	}
	if n, ok := names[st]; ok {
		return n
	}
	return fmt.Sprintf("cublasStatus %d", st)
}

// workspaceRE matches one ":SIZE:COUNT" pair of CUBLAS_WORKSPACE_CONFIG.
var workspaceRE = regexp.MustCompile(`:([0-9]+):([0-9]+)`)

// WorkspaceBytes is the cuBLAS workspace of each (handle, stream) on a GPU of compute
// capability major.minor, as PyTorch sizes it (getChosenWorkspaceSize): the sum of
// SIZE KiB × COUNT over the pairs of CUBLAS_WORKSPACE_CONFIG, or by default 32 MiB on
// sm_90 (":4096:8") and 8 MiB + 128 KiB elsewhere (":4096:2:16:8"). A value with no
// pair gives the default, as PyTorch warns and does.
func WorkspaceBytes(env string, major, minor int) int64 {
	def := int64(4096*1024*2 + 16*1024*8)
	if major == 9 && minor == 0 {
		def = 4096 * 8 * 1024
	}
	m := workspaceRE.FindAllStringSubmatch(env, -1)
	if m == nil {
		return def
	}
	var total int64
	for _, p := range m {
		size, err1 := strconv.ParseInt(p[1], 10, 64)
		count, err2 := strconv.ParseInt(p[2], 10, 64)
		if err1 != nil || err2 != nil {
			return def
		}
		total += size * 1024 * count
	}
	return total
}

// blasPool is a Device's cuBLAS handles: a free list, as PyTorch keeps per thread;
// an op takes one for its calls and puts it back.
type blasPool struct {
	b *Backend // immutable
	// wsBytes is each workspace's size, fixed when the backend is made.
	wsBytes int64

	mu sync.Mutex
	// Guarded by mu.
	free []*blasHandle
	all  []*blasHandle
}

// blasHandle is one cuBLAS handle; the op holding it has it to itself, but held and
// release read its workspaces meanwhile, so its state is guarded by the pool's mu.
type blasHandle struct {
	h uintptr // immutable once created
	// Guarded by blasPool.mu.
	stream device.Stream // the stream set last
	fresh  bool          // no stream and workspace set yet (or they must be set again)
	// ws is the workspace of each stream the handle has run on, from the caching
	// allocator on that stream, kept until Release (PyTorch's cublas_handle_stream_to_workspace).
	ws map[device.Stream]device.Ptr
}

// acquire returns a handle set to stream s with its workspace, creating either on
// first use. When the caching allocator cannot give the workspace, the handle runs
// this op without one (cuBLAS then picks algorithms that need none: the product is
// right, perhaps slower) and tries again next time. An error is the op's: it is kept
// for Check.
func (p *blasPool) acquire(l *blasLib, s device.Stream) (*blasHandle, error) {
	p.mu.Lock()
	var h *blasHandle
	if n := len(p.free); n > 0 {
		h, p.free = p.free[n-1], p.free[:n-1]
	}
	p.mu.Unlock()
	if h == nil {
		h = &blasHandle{fresh: true, ws: make(map[device.Stream]device.Ptr)}
		if err := p.call(l.create, "cublasCreate_v2", uintptr(unsafe.Pointer(&h.h))); err != nil {
			return nil, err
		}
		if err := p.call(l.setMathMode, "cublasSetMathMode", h.h, cublasDefaultMath); err != nil {
			_ = p.call(l.destroy, "cublasDestroy_v2", h.h) // the first error is the one to report
			return nil, err
		}
		p.mu.Lock()
		p.all = append(p.all, h)
		p.mu.Unlock()
	}
	p.mu.Lock()
	set := h.fresh || h.stream != s
	ws, haveWS := h.ws[s]
	// Until the stream and workspace are set, the handle must be set again by
	// whoever takes it next, whatever fails below.
	h.fresh = h.fresh || set
	p.mu.Unlock()
	if !set {
		return h, nil
	}
	// cublasSetStream resets the workspace to cuBLAS's own: set ours after it.
	if err := p.call(l.setStream, "cublasSetStream_v2", h.h, uintptr(s)); err != nil {
		p.put(h)
		return nil, err
	}
	wsBytes := p.wsBytes
	if !haveWS && wsBytes > 0 {
		var err error
		if ws, err = p.b.al.Alloc(wsBytes, s); err != nil {
			ws, wsBytes = 0, 0 // this op without a workspace; the next one tries again
		} else {
			p.mu.Lock()
			h.ws[s] = ws
			p.mu.Unlock()
		}
	}
	if err := p.call(l.setWorkspace, "cublasSetWorkspace_v2", h.h, uintptr(ws), uintptr(wsBytes)); err != nil {
		p.put(h)
		return nil, err
	}
	p.mu.Lock()
	h.stream, h.fresh = s, wsBytes != p.wsBytes
	p.mu.Unlock()
	return h, nil
}

func (p *blasPool) put(h *blasHandle) {
	p.mu.Lock()
	p.free = append(p.free, h)
	p.mu.Unlock()
}

// call calls a cuBLAS entry point with the device's context current.
//
//go:uintptrescapes
func (p *blasPool) call(fn uintptr, name string, args ...uintptr) error {
	if rec := p.b.rec; rec != nil {
		rec.library(name, args)
		return nil
	}
	r, err := p.b.dev.CallLibrary(fn, args...)
	if err != nil {
		return err
	}
	if st := int64(int32(r)); st != cublasStatusSuccess {
		return &BLASError{Call: name, Status: st}
	}
	return nil
}

// BLASError is a cuBLAS call that failed.
type BLASError struct {
	Call   string // "cublasGemmEx(...)"
	Status int64  // the cublasStatus_t
}

func (e *BLASError) Error() string {
	return fmt.Sprintf("kernels/cuda: %s: %s", e.Call, blasStatus(e.Status))
}

// held lists the workspaces.
func (p *blasPool) held() []Held {
	p.mu.Lock()
	defer p.mu.Unlock()
	var h []Held
	for _, bh := range p.all {
		for s := range bh.ws {
			h = append(h, Held{What: fmt.Sprintf("cuBLAS workspace (stream %#x)", uintptr(s)), Bytes: p.wsBytes, Allocator: true})
		}
	}
	return h
}

// release frees the workspaces of the handles no op holds back to the allocator; the
// handles stay (and take a workspace again on their next use). A handle an op holds
// keeps its workspace: the op may be about to use it. The device is idle.
func (p *blasPool) release() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, bh := range p.free {
		for s, ws := range bh.ws {
			if err := p.b.al.Free(ws); err != nil {
				errs = append(errs, err)
			}
			delete(bh.ws, s)
		}
		bh.fresh = true
	}
	return errs
}

// blasLib is the cuBLAS the backend's products use; a recording Backend has one
// that is never called (see recorder).
func (b *Backend) blasLib() (*blasLib, error) {
	if b.rec != nil {
		return &blasLib{version: "recorded"}, nil
	}
	return loadedBLAS()
}
