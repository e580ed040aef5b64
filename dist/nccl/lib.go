package nccl

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/internal/dl"
)

// ErrNoLibrary is wrapped by the errors of Version, NewUniqueID and InitRank when
// libnccl.so.2 cannot be loaded (or is older than NCCL 2.23).
var ErrNoLibrary = errors.New("no NCCL library")

const libraryName = "libnccl.so.2"

// minVersion is NCCL_VERSION_CODE of 2.23.4, the first with ncclCommInitRankScalable.
const minVersion = 22304

// result is an ncclResult_t.
type result int32

const (
	success    result = 0
	inProgress result = 7
)

var resultNames = []string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
	"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress", "ncclTimeout"}

// DataType is an ncclDataType_t.
type DataType int32

// The element types NCCL reduces (nccl.h).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	BFloat16 DataType = 9
)

// Size is the bytes of one element.
func (t DataType) Size() int {
	switch t {
	case Int8, Uint8:
		return 1
	case Float16, BFloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	}
	return 8
}

// RedOp is an ncclRedOp_t.
type RedOp int32

// The reductions (nccl.h).
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// Error is a failed NCCL call.
type Error struct {
	// Call names the entry point and its arguments.
	Call string
	// Code is the ncclResult_t; Name its name ("ncclRemoteError"); Message what
	// ncclGetErrorString says of it.
	Code          int
	Name, Message string
	// Last is ncclGetLastError: NCCL's own account of the failure, when it has one.
	Last string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nccl: %s: %s (%s)", e.Call, e.Name, e.Message)
	if e.Last != "" {
		s += ": " + e.Last
	}
	return s
}

// lib is the process's libnccl: entry points resolved once, immutable after.
type lib struct {
	version int

	getVersion, getUniqueID, commInitRankScalable, commFinalize, commDestroy, commAbort,
	commGetAsyncError, allReduce, broadcast, allGather, reduceScatter, groupStart, groupEnd uintptr

	// getErrorString and getLastError return C strings, which dl.Bind converts.
	getErrorString func(r int32) string
	getLastError   func(comm uintptr) string
}

func (l *lib) symbols() map[string]*uintptr {
	return map[string]*uintptr{
		"ncclGetVersion": &l.getVersion, "ncclGetUniqueId": &l.getUniqueID,
		"ncclCommInitRankScalable": &l.commInitRankScalable, "ncclCommFinalize": &l.commFinalize,
		"ncclCommDestroy": &l.commDestroy, "ncclCommAbort": &l.commAbort,
		"ncclCommGetAsyncError": &l.commGetAsyncError, "ncclAllReduce": &l.allReduce,
		"ncclBroadcast": &l.broadcast, "ncclAllGather": &l.allGather,
		"ncclReduceScatter": &l.reduceScatter, "ncclGroupStart": &l.groupStart, "ncclGroupEnd": &l.groupEnd,
	}
}

var loaded struct {
	once sync.Once
	lib  *lib
	err  error
}

// load returns the process's libnccl, opening it on first use.
func load() (*lib, error) {
	loaded.once.Do(func() { loaded.lib, loaded.err = loadLibrary() })
	return loaded.lib, loaded.err
}

func loadLibrary() (*lib, error) {
	h, err := openLibrary()
	if err != nil {
		return nil, err
	}
	l := new(lib)
	for name, fn := range l.symbols() {
		if *fn, err = dl.Symbol(h, name); err != nil {
			return nil, fmt.Errorf("nccl: %w: %s lacks %s (NCCL 2.23 or later is needed): %v", ErrNoLibrary, libraryName, name, err)
		}
	}
	for name, fptr := range map[string]any{"ncclGetErrorString": &l.getErrorString, "ncclGetLastError": &l.getLastError} {
		fn, err := dl.Symbol(h, name)
		if err != nil {
			return nil, fmt.Errorf("nccl: %w: %s lacks %s: %v", ErrNoLibrary, libraryName, name, err)
		}
		dl.Bind(fptr, fn)
	}
	var v int32
	if r := callInt(l.getVersion, &v); r != success {
		return nil, l.errorf(r, 0, "ncclGetVersion")
	}
	l.version = int(v)
	if l.version < minVersion {
		return nil, fmt.Errorf("nccl: %w: %s is NCCL %s; sublet needs 2.23.4 or later", ErrNoLibrary, libraryName, versionString(l.version))
	}
	return l, nil
}

// openLibrary loads NCCL: the versioned soname its packages install, then the
// development symlink.
func openLibrary() (uintptr, error) {
	if runtime.GOOS != "linux" || !dl.Supported {
		return 0, fmt.Errorf("nccl: %w: NCCL is not available on %s/%s (sublet loads %s on linux/amd64 and linux/arm64)", ErrNoLibrary, runtime.GOOS, runtime.GOARCH, libraryName)
	}
	h, err := dl.Open(libraryName, "libnccl.so")
	if err != nil {
		return 0, fmt.Errorf("nccl: %w: cannot load %s (%v); install NCCL (libnccl2) or add its folder to LD_LIBRARY_PATH", ErrNoLibrary, libraryName, err)
	}
	return h, nil
}

// syscallN calls an NCCL entry point with integer arguments; ncclResult_t is 32 bits.
//
//go:uintptrescapes
func syscallN(fn uintptr, args ...uintptr) result { return result(int32(dl.Call(fn, args...))) }

// callInt calls fn(int* out).
func callInt(fn uintptr, out *int32) result { return syscallN(fn, uintptr(unsafe.Pointer(out))) }

// Version returns NCCL_VERSION_CODE of the loaded library (22807 for 2.28.7).
func Version() (int, error) {
	l, err := load()
	if err != nil {
		return 0, err
	}
	return l.version, nil
}

// versionString spells a version code: 22807 is "2.28.7".
func versionString(code int) string {
	return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
}

// errorf builds the *Error of a failed call on comm (0: none).
func (l *lib) errorf(r result, comm uintptr, format string, args ...any) *Error {
	e := &Error{Call: fmt.Sprintf(format, args...), Code: int(r), Name: fmt.Sprintf("ncclResult(%d)", r)}
	if int(r) >= 0 && int(r) < len(resultNames) {
		e.Name = resultNames[r]
	}
	if l.getErrorString != nil {
		e.Message = l.getErrorString(int32(r))
	}
	if comm != 0 && l.getLastError != nil {
		e.Last = l.getLastError(comm)
	}
	return e
}
