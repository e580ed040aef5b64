package cuda

import (
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// Error is a failed driver call.
type Error struct {
	// Op names the driver entry point and the values it was given,
	// e.g. "cuMemAlloc(1073741824 bytes)".
	Op string
	// Code is the CUresult.
	Code int
	// Name and Message are the driver's cuGetErrorName and cuGetErrorString for Code.
	Name, Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%s)", e.Op, e.Name, e.Message)
}

// Unwrap makes CUDA_ERROR_OUT_OF_MEMORY match device.ErrOutOfMemory under errors.Is.
func (e *Error) Unwrap() error {
	if result(e.Code) == errorOutOfMemory {
		return device.ErrOutOfMemory
	}
	return nil
}

// errorf builds the *Error for a failed call; format and args describe the operation.
// It runs only on failure, so hot paths pay no formatting.
func (drv *driver) errorf(r result, format string, args ...any) *Error {
	return &Error{
		Op:      fmt.Sprintf(format, args...),
		Code:    int(r),
		Name:    drv.describe(drv.cuGetErrorName, r, fmt.Sprintf("CUDA_ERROR_%d", r)),
		Message: drv.describe(drv.cuGetErrorString, r, "unrecognized error code"),
	}
}

// describe asks the driver for a static string about r (cuGetErrorName or
// cuGetErrorString), falling back when the driver does not know the code.
func (drv *driver) describe(fn uintptr, r result, fallback string) string {
	var s *byte
	if syscallN(fn, uintptr(r), uintptr(unsafe.Pointer(&s))) != success || s == nil {
		return fallback
	}
	return cString(s)
}

// cString copies a NUL-terminated C string into Go memory.
func cString(s *byte) string {
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(s), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(s, n))
}
