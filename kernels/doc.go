// Package kernels is the compute-backend seam between the tensor package and the code
// that computes. Programs do not call it: the tensor package builds the operands and
// picks the backend; a new backend implements Backend and passes kernels/kernelstest's
// conformance suite against kernels/cpu. It holds the op enums (UnaryOp, BinaryOp,
// Arg), Layout (shape, strides and offset in elements), Operand (a memory block, a
// layout and an element type, or a Scalar immediate), the optimizer hyper-parameters,
// and Backend, the interface every backend implements. kernels/cpu implements it over host memory and is the reference
// every other backend is tested against; Meta computes nothing, for devices that keep
// no data; a GPU backend passes device pointers.
//
// The tensor package picks one Backend per op from the residency of the op's device
// (device.Residency) and calls it with operands it built from its storages: adding a
// backend touches that one choice, adding an op one Backend method per backend.
//
// An asynchronous backend (kernels/cuda) also implements Async: its ops return before
// they have run, and Check reports at the next synchronisation what the data made go
// wrong. A backend that computes on host memory (kernels/cpu) may implement DenseF32,
// the elementwise ops over dense float32 slices, which the tensor package then calls
// for its small ops instead of building operands; the conformance suite holds them to
// Unary's and Binary's results.
//
// Invariants every backend keeps (Backend's doc has the details):
//   - Backends never allocate outputs or tensor memory: the caller passes every output
//     and temporary, so the allocator sees all memory an op uses. (A GPU backend keeps
//     its own workspace and scratch between ops, which it names: kernels/cuda's Held.)
//   - Results are deterministic: the same inputs give the same bits on every run.
//   - Misuse panics before anything is written; a data-dependent error (an index out
//     of range) is an *IndexError, returned by a synchronous backend before anything
//     is written and by an asynchronous one at the next synchronisation.
package kernels
