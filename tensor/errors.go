package tensor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/subletml/sublet/dtype"
)

// Error is what tensor math panics with: bad shapes or dtypes, use after Release, an
// op on a device without kernels, a lack of device memory inside an op. Op names the
// operation; Shapes, DTypes and Device describe its inputs. Err, when set, is the cause
// (one of the Err* values below, an *alloc.OOMError, an autograd error), reachable with
// errors.Is and errors.As. Try turns the panic back into an error.
type Error struct {
	Op     string
	Shapes [][]int
	DTypes []dtype.DType
	Device string
	Msg    string
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("tensor: ")
	b.WriteString(e.Op)
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	var parts []string
	if len(e.Shapes) > 0 {
		s := make([]string, len(e.Shapes))
		for i, sh := range e.Shapes {
			s[i] = fmt.Sprint(sh)
		}
		parts = append(parts, "shapes "+strings.Join(s, " "))
	}
	if len(e.DTypes) > 0 {
		s := make([]string, len(e.DTypes))
		for i, d := range e.DTypes {
			s[i] = d.String()
		}
		parts = append(parts, "dtypes "+strings.Join(s, " "))
	}
	if e.Device != "" {
		parts = append(parts, "device "+e.Device)
	}
	if len(parts) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Causes an *Error may wrap; test with errors.Is.
var (
	// ErrReleased: a handle was used after Release (or after its scope closed).
	ErrReleased = errors.New("tensor used after Release (or after its scope was closed)")
	// ErrShape: shapes that do not fit the op.
	ErrShape = errors.New("shape mismatch")
	// ErrIndex: an index outside its range (a class label of CrossEntropy, a row of
	// Embedding), found in the data; the error also wraps the *kernels.IndexError
	// naming the position, the index and the range.
	ErrIndex = errors.New("index out of range")
	// ErrDType: an element type the op does not take, or inputs whose types differ
	// where they must agree.
	ErrDType = errors.New("dtype mismatch")
	// ErrDevice: inputs on different devices.
	ErrDevice = errors.New("inputs on different devices")
	// ErrNoKernels: the device has no kernels (a device of the program's own that the CPU
	// cannot address, or a GPU whose kernels cannot load).
	ErrNoKernels = errors.New("no kernels for this device")
	// ErrNoData: the device keeps no data (sim without backing store, the meta device);
	// ops there allocate their outputs and compute nothing, so values cannot be read.
	ErrNoData = errors.New("the device keeps no data (meta device)")
	// ErrScope: a result has no scope to belong to, or its scope is closed, or inputs
	// come from unrelated scopes.
	ErrScope = errors.New("scope")
	// ErrGrad: autograd misuse (backward from a tensor that does not require grad, an
	// in-place op on a tensor the graph needs, ...), or an error of the engine.
	ErrGrad = errors.New("autograd")
)

// Try runs f and returns the *Error f panicked with, or nil. Any other panic goes on
// unwinding: only tensor math errors are turned back into values, so that a step can be
// retried after an out-of-memory error (errors.As(err, new(*alloc.OOMError))).
func Try(f func()) error {
	_, err := TryValue(func() struct{} { f(); return struct{}{} })
	return err
}

// TryValue is Try for a function with a result: f's result and nil, or T's zero value
// and the *Error f panicked with (any other panic goes on unwinding):
//
//	loss, err := tensor.TryValue(func() float64 { return step(batch) })
func TryValue[T any](f func() T) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			var zero T
			v, err = zero, e
		}
	}()
	return f(), nil
}

// gradError is an error of the autograd engine (or of a hook or rule it ran) as a
// cause of an *Error: it matches ErrGrad and the error itself, and reads as the error
// under one "autograd: " (the engine's own errors already start with it).
type gradError struct{ err error }

func gradErr(err error) error { return gradError{err} }

func (e gradError) Error() string {
	msg := e.err.Error()
	if strings.HasPrefix(msg, "autograd: ") {
		return msg
	}
	return "autograd: " + msg
}

func (e gradError) Unwrap() []error { return []error{ErrGrad, e.err} }

// indexError is a *kernels.IndexError as a cause of an *Error: it matches ErrIndex and
// the kernel's error, and reads as the latter (which names the position and range).
type indexError struct{ err error }

func (e indexError) Error() string   { return e.err.Error() }
func (e indexError) Unwrap() []error { return []error{ErrIndex, e.err} }

// fail panics with an *Error for op over the inputs ins.
func fail(op string, cause error, ins []*Tensor, format string, args ...any) {
	panic(newError(op, cause, ins, format, args...))
}

func newError(op string, cause error, ins []*Tensor, format string, args ...any) *Error {
	e := &Error{Op: op, Msg: fmt.Sprintf(format, args...), Err: cause}
	for _, t := range ins {
		if t == nil {
			continue
		}
		e.Shapes = append(e.Shapes, t.Shape())
		e.DTypes = append(e.DTypes, t.dt)
		if e.Device == "" {
			e.Device = t.st.dev.Name()
		}
	}
	return e
}
