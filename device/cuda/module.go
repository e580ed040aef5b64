package cuda

import (
	"bytes"
	"encoding/binary"
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

// Arg is one kernel argument passed by value. Build it with ArgPtr, ArgInt32 and the
// other constructors, which match the kernel's parameter types; ArgBytes passes a
// struct.
type Arg struct {
	bits uint64
	// blob and n are set by ArgBytes: the n bytes at blob are the parameter's value.
	// Launch copies them into its parameter block before the call, so the memory need
	// only live until Launch returns (a struct on the caller's stack does).
	blob *byte
	// n is the parameter's size in bytes: 4 or 8 for a scalar, the struct's for
	// ArgBytes.
	n uint32
}

// Size is the bytes the argument passes: 4 for a 32-bit scalar, 8 for a 64-bit one or
// a pointer, the struct's size for ArgBytes. A kernel's parameter must be that size.
func (a Arg) Size() int { return int(a.n) }

// Bits is a scalar argument's value as stored (little-endian in 8 bytes); 0 for
// ArgBytes.
func (a Arg) Bits() uint64 { return a.bits }

// Bytes is an ArgBytes argument's bytes (the memory it was given), nil for a scalar.
func (a Arg) Bytes() []byte {
	if a.blob == nil {
		return nil
	}
	return unsafe.Slice(a.blob, a.n)
}

// ArgPtr passes a device pointer (a T* parameter).
func ArgPtr(p device.Ptr) Arg { return Arg{bits: uint64(p), n: 8} }

// ArgInt32 passes an int parameter.
func ArgInt32(v int32) Arg { return Arg{bits: uint64(uint32(v)), n: 4} }

// ArgUint32 passes an unsigned int parameter.
func ArgUint32(v uint32) Arg { return Arg{bits: uint64(v), n: 4} }

// ArgInt64 passes a long long parameter.
func ArgInt64(v int64) Arg { return Arg{bits: uint64(v), n: 8} }

// ArgUint64 passes an unsigned long long or size_t parameter.
func ArgUint64(v uint64) Arg { return Arg{bits: v, n: 8} }

// ArgFloat32 passes a float parameter.
func ArgFloat32(v float32) Arg { return Arg{bits: uint64(math.Float32bits(v)), n: 4} }

// ArgFloat64 passes a double parameter.
func ArgFloat64(v float64) Arg { return Arg{bits: math.Float64bits(v), n: 8} }

// ArgBytes passes b as one by-value parameter: a C struct whose bytes b holds in the
// device's layout (little-endian, natural alignment, as nvcc lays out a struct of
// fixed-width fields). Launch copies b, so it may be a view of a struct on the caller's
// stack (unsafe.Slice of its address), and no heap allocation is made per launch.
func ArgBytes(b []byte) Arg {
	if len(b) == 0 {
		return Arg{}
	}
	return Arg{blob: &b[0], n: uint32(len(b))}
}

// MaxKernelArgs is the most arguments Launch passes.
const MaxKernelArgs = 32

// MaxArgBytes is the most bytes the ArgBytes arguments of one launch may hold together:
// CUDA's limit on a kernel's parameters is 4096 bytes, the scalar arguments included.
const MaxArgBytes = 4096

// launchParams is the kernelParams block of cuLaunchKernel: ptrs[i] points at vals[i],
// each value stored little-endian in 8 bytes, so a 4-byte parameter reads the low half,
// or, for an ArgBytes argument, at its copy in blob (each copy starting on an 8-byte
// boundary). It is allocated on the heap by newLaunchParams and never moves; the driver
// copies the values during cuLaunchKernel, so a block is reusable as soon as the launch
// returns.
type launchParams struct {
	vals [MaxKernelArgs]uint64
	ptrs [MaxKernelArgs]unsafe.Pointer
	blob [MaxArgBytes]byte
	// call holds the arguments of a foreign call made by Device.callInts.
	call [maxCallArgs]uintptr
}

// maxCallArgs is the most arguments Device.callInts passes (cuLaunchKernel's 11).
const maxCallArgs = 12

// pack stores args in p and returns how many bytes of blob they use, or an error when
// ArgBytes arguments do not fit in MaxArgBytes. It allocates nothing.
func (p *launchParams) pack(args []Arg) (int, error) {
	used := 0
	for i, a := range args {
		if a.blob == nil {
			p.vals[i] = a.bits
			p.ptrs[i] = unsafe.Pointer(&p.vals[i])
			continue
		}
		off := (used + 7) &^ 7
		if off+int(a.n) > MaxArgBytes {
			return 0, fmt.Errorf("%d bytes of struct arguments at argument %d, at most %d in all", off+int(a.n), i, MaxArgBytes)
		}
		copy(p.blob[off:off+int(a.n)], unsafe.Slice(a.blob, a.n))
		p.ptrs[i] = unsafe.Pointer(&p.blob[off])
		used = off + int(a.n)
	}
	return used, nil
}

func newLaunchParams() any {
	p := new(launchParams)
	for i := range p.ptrs {
		p.ptrs[i] = unsafe.Pointer(&p.vals[i])
	}
	return p
}

// fatbinMagic starts every fatbin image (fatbinary.h's FATBIN_MAGIC, little-endian).
const fatbinMagic = 0xBA55ED50

// LoadFatbin loads a fatbin image (nvcc -fatbin: SASS for some architectures and PTX
// that the driver compiles for the others) into this Device's context with
// cuModuleLoadData. The driver picks the SASS of this GPU's architecture when the image
// has it, which loads in about a millisecond, else JIT-compiles the PTX. The image is
// copied to 8-byte-aligned memory first (an embedded file need not be aligned).
func (d *Device) LoadFatbin(image []byte) (*Module, error) {
	if len(image) < 16 || binary.LittleEndian.Uint32(image) != fatbinMagic {
		return nil, fmt.Errorf("cuda: %s: LoadFatbin: %d bytes that are not a fatbin (no magic %#x at the start)", d.name, len(image), uint32(fatbinMagic))
	}
	words := make([]uint64, (len(image)+7)/8)
	aligned := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(image))
	copy(aligned, image)
	m := &Module{d: d}
	if r := d.call(d.drv.cuModuleLoadData, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&aligned[0]))); r != success {
		return nil, d.drv.errorf(r, "cuModuleLoadData(%s, fatbin of %d bytes)", d.name, len(image))
	}
	return m, nil
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

// FunctionAttributes are what the driver reports about a loaded kernel
// (cuFuncGetAttribute): what a launch may ask of it and what it costs per thread.
type FunctionAttributes struct {
	// MaxThreadsPerBlock is the largest block this kernel launches with (its registers
	// and __launch_bounds__ decide it).
	MaxThreadsPerBlock int
	// SharedBytes is its static shared memory per block.
	SharedBytes int
	// LocalBytes is its local memory per thread: register spills and stack arrays.
	LocalBytes int
	// Registers is the registers each thread uses.
	Registers int
	// PTXVersion and BinaryVersion are the PTX ISA and SASS architecture it was built
	// for, as 10*major+minor (78 for PTX ISA 7.8, 90 for sm_90).
	PTXVersion, BinaryVersion int
}

// Attributes reports the driver's attributes of the kernel.
func (f *Function) Attributes() (FunctionAttributes, error) {
	var a FunctionAttributes
	for _, q := range []struct {
		attr uintptr
		dst  *int
	}{
		{funcAttrMaxThreadsPerBlock, &a.MaxThreadsPerBlock},
		{funcAttrSharedSizeBytes, &a.SharedBytes},
		{funcAttrLocalSizeBytes, &a.LocalBytes},
		{funcAttrNumRegs, &a.Registers},
		{funcAttrPTXVersion, &a.PTXVersion},
		{funcAttrBinaryVersion, &a.BinaryVersion},
	} {
		var v int32
		if r := f.m.d.call(f.m.d.drv.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), q.attr, f.h); r != success {
			return a, f.m.d.drv.errorf(r, "cuFuncGetAttribute(%s, %d)", f.name, q.attr)
		}
		*q.dst = int(v)
	}
	return a, nil
}

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
	if _, err := p.pack(args); err != nil {
		d.params.Put(p)
		return fmt.Errorf("cuda: %s: Launch(%s): %w", d.name, f.name, err)
	}
	r := d.callInts(d.drv.cuLaunchKernel, f.h,
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
