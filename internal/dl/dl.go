// Package dl loads C shared libraries at run time and calls their entry points,
// through purego: no cgo, nothing loaded at import. It is the one way sublet reaches a
// library it does not link (libcuda in device/cuda, libnccl in dist/nccl).
//
// Invariants:
//   - Libraries load only where purego works without cgo (Supported: linux and darwin
//     on amd64 and arm64); elsewhere Open fails with an error wrapping ErrUnsupported,
//     so nothing else of this package is reached.
//   - Call passes integers only. A Go pointer converted with uintptr(unsafe.Pointer(p))
//     in the expression that calls Call (or a //go:uintptrescapes wrapper of it) stays
//     alive and in place until the call returns; C never keeps it.
package dl

import "errors"

// ErrUnsupported is wrapped by Open's error where libraries cannot be loaded.
var ErrUnsupported = errors.New("dl: shared libraries are not loaded on this platform")

// Open loads the first of names that loads (RTLD_NOW, RTLD_LOCAL: a versioned soname,
// then the development symlink, say) and returns its handle. Its error carries the
// first name's failure.
func Open(names ...string) (uintptr, error) { return open(names) }

// Symbol returns the address of the entry point name in the library h.
func Symbol(h uintptr, name string) (uintptr, error) { return symbol(h, name) }

// Call calls the entry point fn with integer arguments and returns the return register.
//
//go:uintptrescapes
func Call(fn uintptr, args ...uintptr) uintptr { return call(fn, args) }

// CallArgs is Call with the arguments in a slice that is on the heap already (a pooled
// block), for hot paths: Call's variadic slice escapes to the heap on every call, as
// its go:uintptrescapes directive makes it, and this one allocates nothing. It keeps
// nothing alive: a pointer among args must point into memory the caller keeps alive
// until it returns.
func CallArgs(fn uintptr, args []uintptr) uintptr { return call(fn, args) }

// Bind makes the function *fptr call the entry point fn, converting Go values to C as
// purego.RegisterFunc does (a returned const char* becomes a string); for entry points
// whose arguments or results are not integers.
func Bind(fptr any, fn uintptr) { bind(fptr, fn) }
