package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/internal/dl"
)

// ErrNoDriver is wrapped by the error of Open, Count and DriverVersion when the CUDA
// driver library cannot be loaded or initialised on this machine.
var ErrNoDriver = errors.New("no CUDA driver")

// ErrNoDevice is wrapped by the error of Open when the driver is loaded but has no GPU
// with the requested ordinal.
var ErrNoDevice = errors.New("no CUDA device")

// libraryName is the soname of the CUDA driver library.
const libraryName = "libcuda.so.1"

// result is a CUresult.
type result uint32

// CUresult values the package acts on (cuda.h).
const (
	success          result = 0
	errorOutOfMemory result = 2
	errorNoDevice    result = 100
	errorNotReady    result = 600
)

// Flags and enumerations passed to the driver (cuda.h).
const (
	streamNonBlocking      = 0x1 // CU_STREAM_NON_BLOCKING
	eventDefault           = 0x0 // CU_EVENT_DEFAULT
	eventDisableTiming     = 0x2 // CU_EVENT_DISABLE_TIMING
	memAllocationPinned    = 0x1 // CU_MEM_ALLOCATION_TYPE_PINNED
	memLocationDevice      = 0x1 // CU_MEM_LOCATION_TYPE_DEVICE
	memAccessReadWrite     = 0x3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	granularityMinimum     = 0x0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM
	hostAllocDefault       = 0x0 // cuMemHostAlloc flags: page-locked, this context
	attrMaxThreadsPerBlock = 1   // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	attrMaxSharedPerBlock  = 8   // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK
	attrWarpSize           = 10  // CU_DEVICE_ATTRIBUTE_WARP_SIZE
	attrMultiprocessors    = 16  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	attrPCIBusID           = 33  // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
	attrPCIDeviceID        = 34  // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
	attrL2CacheSize        = 38  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
	attrMaxThreadsPerSM    = 39  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
	attrUnifiedAddressing  = 41  // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	attrPCIDomainID        = 50  // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
	attrComputeMajor       = 75  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrComputeMinor       = 76  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	attrVirtualMemory      = 102 // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED

	funcAttrMaxThreadsPerBlock = 0 // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	funcAttrSharedSizeBytes    = 1 // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	funcAttrLocalSizeBytes     = 3 // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
	funcAttrNumRegs            = 4 // CU_FUNC_ATTRIBUTE_NUM_REGS
	funcAttrPTXVersion         = 5 // CU_FUNC_ATTRIBUTE_PTX_VERSION
	funcAttrBinaryVersion      = 6 // CU_FUNC_ATTRIBUTE_BINARY_VERSION
)

// driver holds the entry points of libcuda, resolved once by load and immutable after.
// Versioned names (_v2) are the ones cuda.h maps the plain names to.
type driver struct {
	cuInit                        uintptr
	cuDriverGetVersion            uintptr
	cuGetErrorName                uintptr
	cuGetErrorString              uintptr
	cuDeviceGetCount              uintptr
	cuDeviceGet                   uintptr
	cuDeviceGetName               uintptr
	cuDeviceTotalMem              uintptr
	cuDeviceGetAttribute          uintptr
	cuDevicePrimaryCtxRetain      uintptr
	cuDevicePrimaryCtxRelease     uintptr
	cuCtxSetCurrent               uintptr
	cuCtxGetCurrent               uintptr
	cuCtxSynchronize              uintptr
	cuMemGetInfo                  uintptr
	cuMemAlloc                    uintptr
	cuMemFree                     uintptr
	cuMemHostAlloc                uintptr
	cuMemFreeHost                 uintptr
	cuMemHostRegister             uintptr
	cuMemHostUnregister           uintptr
	cuStreamCreate                uintptr
	cuStreamDestroy               uintptr
	cuStreamSynchronize           uintptr
	cuStreamWaitEvent             uintptr
	cuEventCreate                 uintptr
	cuEventRecord                 uintptr
	cuEventQuery                  uintptr
	cuEventSynchronize            uintptr
	cuEventElapsedTime            uintptr
	cuEventDestroy                uintptr
	cuMemcpyHtoDAsync             uintptr
	cuMemcpyDtoHAsync             uintptr
	cuMemcpyDtoDAsync             uintptr
	cuMemsetD8Async               uintptr
	cuModuleLoadData              uintptr
	cuModuleGetFunction           uintptr
	cuModuleUnload                uintptr
	cuLaunchKernel                uintptr
	cuFuncGetAttribute            uintptr
	cuMemGetAllocationGranularity uintptr
	cuMemAddressReserve           uintptr
	cuMemAddressFree              uintptr
	cuMemCreate                   uintptr
	cuMemRelease                  uintptr
	cuMemMap                      uintptr
	cuMemUnmap                    uintptr
	cuMemSetAccess                uintptr
	cuStreamBeginCapture          uintptr
	cuStreamEndCapture            uintptr
	cuGraphInstantiate            uintptr
	cuGraphLaunch                 uintptr
	cuGraphExecDestroy            uintptr
	cuGraphDestroy                uintptr
}

// driverSymbol names the libcuda export behind one driver field; older is the name
// that drivers predating it export instead (or "").
type driverSymbol struct {
	fn          *uintptr
	name, older string
}

// symbols pairs each driver field with its exported name in libcuda.
func (drv *driver) symbols() []driverSymbol {
	return []driverSymbol{
		{&drv.cuInit, "cuInit", ""},
		{&drv.cuDriverGetVersion, "cuDriverGetVersion", ""},
		{&drv.cuGetErrorName, "cuGetErrorName", ""},
		{&drv.cuGetErrorString, "cuGetErrorString", ""},
		{&drv.cuDeviceGetCount, "cuDeviceGetCount", ""},
		{&drv.cuDeviceGet, "cuDeviceGet", ""},
		{&drv.cuDeviceGetName, "cuDeviceGetName", ""},
		{&drv.cuDeviceTotalMem, "cuDeviceTotalMem_v2", ""},
		{&drv.cuDeviceGetAttribute, "cuDeviceGetAttribute", ""},
		{&drv.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", ""},
		{&drv.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", ""},
		{&drv.cuCtxSetCurrent, "cuCtxSetCurrent", ""},
		{&drv.cuCtxGetCurrent, "cuCtxGetCurrent", ""},
		{&drv.cuCtxSynchronize, "cuCtxSynchronize", ""},
		{&drv.cuMemGetInfo, "cuMemGetInfo_v2", ""},
		{&drv.cuMemAlloc, "cuMemAlloc_v2", ""},
		{&drv.cuMemFree, "cuMemFree_v2", ""},
		{&drv.cuMemHostAlloc, "cuMemHostAlloc", ""},
		{&drv.cuMemFreeHost, "cuMemFreeHost", ""},
		{&drv.cuMemHostRegister, "cuMemHostRegister_v2", ""},
		{&drv.cuMemHostUnregister, "cuMemHostUnregister", ""},
		{&drv.cuStreamCreate, "cuStreamCreate", ""},
		{&drv.cuStreamDestroy, "cuStreamDestroy_v2", ""},
		{&drv.cuStreamSynchronize, "cuStreamSynchronize", ""},
		{&drv.cuStreamWaitEvent, "cuStreamWaitEvent", ""},
		{&drv.cuEventCreate, "cuEventCreate", ""},
		{&drv.cuEventRecord, "cuEventRecord", ""},
		{&drv.cuEventQuery, "cuEventQuery", ""},
		{&drv.cuEventSynchronize, "cuEventSynchronize", ""},
		{&drv.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"},
		{&drv.cuEventDestroy, "cuEventDestroy_v2", ""},
		{&drv.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", ""},
		{&drv.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", ""},
		{&drv.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", ""},
		{&drv.cuMemsetD8Async, "cuMemsetD8Async", ""},
		{&drv.cuModuleLoadData, "cuModuleLoadData", ""},
		{&drv.cuModuleGetFunction, "cuModuleGetFunction", ""},
		{&drv.cuModuleUnload, "cuModuleUnload", ""},
		{&drv.cuLaunchKernel, "cuLaunchKernel", ""},
		{&drv.cuFuncGetAttribute, "cuFuncGetAttribute", ""},
		{&drv.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", ""},
		{&drv.cuMemAddressReserve, "cuMemAddressReserve", ""},
		{&drv.cuMemAddressFree, "cuMemAddressFree", ""},
		{&drv.cuMemCreate, "cuMemCreate", ""},
		{&drv.cuMemRelease, "cuMemRelease", ""},
		{&drv.cuMemMap, "cuMemMap", ""},
		{&drv.cuMemUnmap, "cuMemUnmap", ""},
		{&drv.cuMemSetAccess, "cuMemSetAccess", ""},
		{&drv.cuStreamBeginCapture, "cuStreamBeginCapture_v2", ""},
		{&drv.cuStreamEndCapture, "cuStreamEndCapture", ""},
		{&drv.cuGraphInstantiate, "cuGraphInstantiateWithFlags", ""},
		{&drv.cuGraphLaunch, "cuGraphLaunch", ""},
		{&drv.cuGraphExecDestroy, "cuGraphExecDestroy", ""},
		{&drv.cuGraphDestroy, "cuGraphDestroy", ""},
	}
}

// loaded is the process's one view of libcuda: dlopen, symbol resolution and cuInit
// happen once, on first use, and their outcome never changes after.
var loaded struct {
	once sync.Once
	drv  *driver
	// noDevices is set when cuInit reported CUDA_ERROR_NO_DEVICE: the driver works but
	// this machine has no GPU it can use.
	noDevices bool
	err       error
}

// load returns the process's driver, loading libcuda and calling cuInit on first use.
func load() (*driver, error) {
	loaded.once.Do(func() {
		loaded.drv, loaded.noDevices, loaded.err = loadDriver()
	})
	return loaded.drv, loaded.err
}

func loadDriver() (*driver, bool, error) {
	lib, err := openLibrary()
	if err != nil {
		return nil, false, err
	}
	drv := new(driver)
	for _, s := range drv.symbols() {
		fn, err := dl.Symbol(lib, s.name)
		if err != nil && s.older != "" {
			fn, err = dl.Symbol(lib, s.older)
		}
		if err != nil {
			return nil, false, fmt.Errorf("cuda: %w: %s has no symbol %s (%v); the driver is older than CUDA 11.4", ErrNoDriver, libraryName, s.name, err)
		}
		*s.fn = fn
	}
	switch r := syscallN(drv.cuInit, 0); r {
	case success:
		return drv, false, nil
	case errorNoDevice:
		return drv, true, nil
	default:
		return nil, false, fmt.Errorf("%w (%w)", drv.errorf(r, "cuInit(0)"), ErrNoDriver)
	}
}

// Count returns the number of CUDA devices the driver sees (0 when the driver works but
// finds no GPU).
func Count() (int, error) {
	drv, err := load()
	if err != nil {
		return 0, err
	}
	if loaded.noDevices {
		return 0, nil
	}
	var n int32
	if r := syscallN(drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); r != success {
		return 0, drv.errorf(r, "cuDeviceGetCount")
	}
	return int(n), nil
}

// DriverVersion returns the CUDA version the driver supports, encoded as
// 1000*major + 10*minor (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	drv, err := load()
	if err != nil {
		return 0, err
	}
	var v int32
	if r := syscallN(drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))); r != success {
		return 0, drv.errorf(r, "cuDriverGetVersion")
	}
	return int(v), nil
}
