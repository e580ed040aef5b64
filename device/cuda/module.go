package cuda

import (
	"bytes"
	"fmt"
	"math"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// Module is code loaded into a Device's context from PTX.
type Module struct {
	d *Device
	h uintptr // CUmodule
}

// Function is a kernel of a loaded Module.
type Function struct {
	m    *Module
	h    uintptr // CUfunction
	name string
}

// Dim3 is a grid or block shape; zero components count as 1.
type Dim3 struct{ X, Y, Z uint32 }

// LaunchConfig is the shape and placement of one kernel launch.
type LaunchConfig struct {
	Grid, Block Dim3
	// SharedMem is the dynamic shared memory per block, in bytes.
	SharedMem uint32
	Stream    device.Stream
}

// Arg is one kernel argument of at most 8 bytes, passed by value. Build it with
// ArgPtr, ArgInt32 and the other constructors, which match the kernel's parameter types.
type Arg struct{ bits uint64 }

// ArgPtr passes a device pointer (a T* parameter).
func ArgPtr(p device.Ptr) Arg { return Arg{uint64(p)} }

// ArgInt32 passes an int parameter.
func ArgInt32(v int32) Arg { return Arg{uint64(uint32(v))} }

// ArgUint32 passes an unsigned int parameter.
func ArgUint32(v uint32) Arg { return Arg{uint64(v)} }

// ArgInt64 passes a long long parameter.
func ArgInt64(v int64) Arg { return Arg{uint64(v)} }

// ArgUint64 passes an unsigned long long or size_t parameter.
func ArgUint64(v uint64) Arg { return Arg{v} }

// ArgFloat32 passes a float parameter.
func ArgFloat32(v float32) Arg { return Arg{uint64(math.Float32bits(v))} }

// ArgFloat64 passes a double parameter.
func ArgFloat64(v float64) Arg { return Arg{math.Float64bits(v)} }

// MaxKernelArgs is the most arguments Launch passes.
const MaxKernelArgs = 32

// launchParams is the kernelParams block of cuLaunchKernel: ptrs[i] points at vals[i],
// each value stored little-endian in 8 bytes, so a 4-byte parameter reads the low half.
// It is allocated on the heap by newLaunchParams and never moves; the driver copies the
// values during cuLaunchKernel, so a block is reusable as soon as the launch returns.
type launchParams struct {
	vals [MaxKernelArgs]uint64
	ptrs [MaxKernelArgs]unsafe.Pointer
}

func newLaunchParams() any {
	p := new(launchParams)
	for i := range p.ptrs {
		p.ptrs[i] = unsafe.Pointer(&p.vals[i])
	}
	return p
}

// LoadModule JIT-compiles PTX text (cuModuleLoadData) into this Device's context.
func (d *Device) LoadModule(ptx []byte) (*Module, error) {
	if len(ptx) == 0 {
		return nil, fmt.Errorf("cuda: %s: LoadModule: empty PTX", d.name)
	}
	image := ptx
	if bytes.IndexByte(ptx, 0) < 0 {
		image = append(append(make([]byte, 0, len(ptx)+1), ptx...), 0)
	}
	m := &Module{d: d}
	if r := d.call(d.drv.cuModuleLoadData, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&image[0]))); r != success {
		return nil, d.drv.errorf(r, "cuModuleLoadData(%s, %d bytes of PTX)", d.name, len(ptx))
	}
	return m, nil
}

// Function looks up the kernel called name (its extern "C" or mangled name).
func (m *Module) Function(name string) (*Function, error) {
	cname := append([]byte(name), 0)
	f := &Function{m: m, name: name}
	if r := m.d.call(m.d.drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f.h)), m.h, uintptr(unsafe.Pointer(&cname[0]))); r != success {
		return nil, m.d.drv.errorf(r, "cuModuleGetFunction(%q)", name)
	}
	return f, nil
}

// Unload unloads the module; its Functions must not be launched after.
func (m *Module) Unload() error {
	if r := m.d.call(m.d.drv.cuModuleUnload, m.h); r != success {
		return m.d.drv.errorf(r, "cuModuleUnload(%#x)", m.h)
	}
	return nil
}

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }

// Launch orders kernel f on cfg.Stream with the given arguments (cuLaunchKernel).
func (d *Device) Launch(f *Function, cfg LaunchConfig, args ...Arg) error {
	if f.m.d != d {
		return fmt.Errorf("cuda: %s: Launch(%s): the kernel was loaded on %s", d.name, f.name, f.m.d.name)
	}
	if len(args) > MaxKernelArgs {
		return fmt.Errorf("cuda: %s: Launch(%s): %d arguments, at most %d", d.name, f.name, len(args), MaxKernelArgs)
	}
	if err := d.live("Launch", cfg.Stream, 0); err != nil {
		return err
	}
	g, b := cfg.Grid.orOnes(), cfg.Block.orOnes()
	p := d.params.Get().(*launchParams)
	for i, a := range args {
		p.vals[i] = a.bits
	}
	r := d.call(d.drv.cuLaunchKernel, f.h,
		uintptr(g.X), uintptr(g.Y), uintptr(g.Z),
		uintptr(b.X), uintptr(b.Y), uintptr(b.Z),
		uintptr(cfg.SharedMem), uintptr(cfg.Stream), uintptr(unsafe.Pointer(&p.ptrs[0])), 0)
	d.params.Put(p)
	if r != success {
		return d.drv.errorf(r, "cuLaunchKernel(%s, grid %v, block %v, shared %d, stream %#x, %d args)",
			f.name, g, b, cfg.SharedMem, uintptr(cfg.Stream), len(args))
	}
	return nil
}

func (v Dim3) orOnes() Dim3 { return Dim3{max(v.X, 1), max(v.Y, 1), max(v.Z, 1)} }
