// Package safetensors saves and loads tensors, module parameters and optimizer state
// in the safetensors format, the one Python's safetensors library and PyTorch
// (safetensors.torch.load_file, save_file) read and write.
// docs/pytorch.md maps the PyTorch calls a user reaches for to sublet's.
//
// # Use
//
//	err := safetensors.SaveModuleFile("model.safetensors", model, nil) // state_dict's keys
//	err = safetensors.LoadModuleFile("model.safetensors", model)       // strict: every name, shape, type
//	f, err := safetensors.Open("model.safetensors")                    // one tensor, or the metadata
//	w, err := f.Load(step, dev, "0.weight")                            // a tensor owned by step
//	err = f.Close()
//
// SaveOptimizerFile and LoadOptimizerFile do the same for an optimizer's state
// (optim.StateDict): the tensors under "state.<i>.<name>" and the param_groups as JSON
// in the "param_groups" metadata, so that Python rebuilds
// {"state": {i: {name: t}}, "param_groups": json.loads(...)} for
// torch.optim.Optimizer.load_state_dict. Write and Reader work on any named tensors.
//
// # The format
//
// 8 bytes: N, the header's length, an unsigned little-endian 64-bit integer; N bytes:
// the header, UTF-8 JSON starting with '{', padded at the end with spaces: an object
// mapping each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]} and
// the optional "__metadata__" to a string-to-string object; then the data: each
// tensor's elements, row-major, little-endian, at [begin, end) from the data's start.
//
// # Invariants
//
//   - Reading checks everything before anything is used: the header's length (at most
//     100 MB, as the reference implementation), its JSON (no duplicate names, string
//     metadata), each tensor's dtype, shape and byte count (overflow included), and
//     that the tensors tile the data exactly, without holes or overlaps (the format
//     forbids polyglot files). A file that fails is an error naming the first problem.
//   - Writing lays the tensors out as the reference implementation does: by element
//     size, largest first, then by name, after a header padded to 8 bytes, so every
//     tensor's data is aligned to its element size.
//   - Memory: one tensor's bytes at a time are on the host, in writing and in reading;
//     a file is never held whole.
//   - Loading never converts: a tensor goes into a parameter of its exact shape and
//     type, or it is an error.
package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/subletml/sublet/dtype"
)

// MaxHeader is the longest header Reader accepts, the reference implementation's limit.
const MaxHeader = 100_000_000

// ErrFormat is wrapped by every error about a malformed file.
var ErrFormat = errors.New("safetensors: malformed file")

// Info describes one tensor of a file.
type Info struct {
	Name string
	// DType is the element type, dtype.Invalid for a type the file names that sublet
	// has no tensors of (U8, I8, F8_E4M3, …): DTypeName says which. Such a tensor can
	// be read as bytes (Reader.Bytes), not as a tensor.
	DType     dtype.DType
	DTypeName string
	Shape     []int
	// Begin and End are its bytes in the data, [Begin, End).
	Begin, End int64
}

// Bytes is the size of the tensor's data.
func (i Info) Bytes() int64 { return i.End - i.Begin }

// names of the dtypes sublet has, in the format's spelling.
var names = map[dtype.DType]string{
	dtype.Bool: "BOOL", dtype.F16: "F16", dtype.BF16: "BF16", dtype.I32: "I32", dtype.F32: "F32", dtype.I64: "I64",
	dtype.F64: "F64",
}

// sizes of every dtype the format defines, by name.
var sizes = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8,
}

// dtypeOf is the sublet dtype of a format name (Invalid when sublet has none).
func dtypeOf(name string) dtype.DType {
	for dt, n := range names {
		if n == name {
			return dt
		}
	}
	return dtype.Invalid
}

// header is a parsed header.
type header struct {
	tensors  []Info // by Begin
	metadata map[string]string
}

// entry is a tensor's header entry as the JSON has it.
type entry struct {
	DType       string        `json:"dtype"`
	Shape       []json.Number `json:"shape"`
	DataOffsets []json.Number `json:"data_offsets"`
}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// parseHeader parses and checks the header h of a file whose data holds dataLen
// bytes.
func parseHeader(h []byte, dataLen int64) (header, error) {
	if len(h) == 0 || h[0] != '{' {
		return header{}, formatErr("the header does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(h))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return header{}, formatErr("the header's JSON: %v", err)
	}
	hd := header{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return header{}, formatErr("the header's JSON: %v", err)
		}
		name := tok.(string) // object keys are strings
		if seen[name] {
			return header{}, formatErr("the name %q appears twice in the header", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			if err := dec.Decode(&hd.metadata); err != nil {
				return header{}, formatErr("__metadata__ must map strings to strings: %v", err)
			}
			continue
		}
		var e entry
		if err := dec.Decode(&e); err != nil {
			return header{}, formatErr("tensor %q: the header's JSON: %v", name, err)
		}
		info, err := e.info(name)
		if err != nil {
			return header{}, err
		}
		hd.tensors = append(hd.tensors, info)
	}
	if _, err := dec.Token(); err != nil {
		return header{}, formatErr("the header's JSON: %v", err)
	}
	if rest := h[dec.InputOffset():]; len(bytes.Trim(rest, " ")) != 0 {
		return header{}, formatErr("the header has %d bytes after its JSON object that are not space padding", len(rest))
	}
	slices.SortFunc(hd.tensors, func(a, b Info) int {
		if a.Begin != b.Begin {
			return int(a.Begin - b.Begin)
		}
		return int(a.End - b.End)
	})
	var at int64
	for _, t := range hd.tensors {
		if t.Begin != at {
			return header{}, formatErr("tensor %q starts at byte %d of the data, where %d was expected: the data has a hole or overlap",
				t.Name, t.Begin, at)
		}
		at = t.End
	}
	if at != dataLen {
		return header{}, formatErr("the tensors cover %d bytes of data, the file holds %d", at, dataLen)
	}
	return hd, nil
}

// info checks a header entry.
func (e entry) info(name string) (Info, error) {
	size, ok := sizes[e.DType]
	if !ok {
		return Info{}, formatErr("tensor %q has the unknown dtype %q", name, e.DType)
	}
	if len(e.DataOffsets) != 2 {
		return Info{}, formatErr("tensor %q has %d data offsets; want [begin, end]", name, len(e.DataOffsets))
	}
	off := [2]int64{}
	for i, n := range e.DataOffsets {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || v < 0 {
			return Info{}, formatErr("tensor %q: data offset %s is not a byte position", name, n)
		}
		off[i] = v
	}
	info := Info{Name: name, DType: dtypeOf(e.DType), DTypeName: e.DType, Begin: off[0], End: off[1]}
	count := uint64(1)
	for _, n := range e.Shape {
		d, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || d < 0 {
			return Info{}, formatErr("tensor %q: dimension %s is not a size", name, n)
		}
		hi, lo := bits.Mul64(count, uint64(d))
		if hi != 0 {
			return Info{}, formatErr("tensor %q: shape %v overflows", name, e.Shape)
		}
		count = lo
		info.Shape = append(info.Shape, int(d))
	}
	hi, n := bits.Mul64(count, uint64(size))
	if hi != 0 || n > math.MaxInt64 {
		return Info{}, formatErr("tensor %q: shape %v overflows", name, e.Shape)
	}
	if info.End < info.Begin || uint64(info.End-info.Begin) != n {
		return Info{}, formatErr("tensor %q: %s %v takes %d bytes, its data offsets [%d, %d] hold %d",
			name, e.DType, info.Shape, n, info.Begin, info.End, info.End-info.Begin)
	}
	return info, nil
}

// buildHeader lays tensors out (largest element first, then by name) and returns the
// header, padded with spaces so that the data starts 8-byte aligned, with the layout.
func buildHeader(ts []Info, metadata map[string]string) ([]byte, []Info, error) {
	out := slices.Clone(ts)
	seen := make(map[string]bool, len(out))
	for i, t := range out {
		if t.Name == "" || t.Name == "__metadata__" {
			return nil, nil, fmt.Errorf("safetensors: tensor %d is named %q; give every tensor a name other than __metadata__", i, t.Name)
		}
		if seen[t.Name] {
			return nil, nil, fmt.Errorf("safetensors: two tensors are named %q", t.Name)
		}
		seen[t.Name] = true
	}
	slices.SortFunc(out, func(a, b Info) int {
		if sa, sb := sizes[a.DTypeName], sizes[b.DTypeName]; sa != sb {
			return int(sb - sa)
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		m, err := json.Marshal(metadata)
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: the metadata: %w", err)
		}
		b.WriteString(`"__metadata__":`)
		b.Write(m)
	}
	var at int64
	for i := range out {
		t := &out[i]
		t.Begin, t.End = at, at+t.End-t.Begin
		at = t.End
		name, _ := json.Marshal(t.Name)
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(name)
		fmt.Fprintf(&b, `:{"dtype":%q,"shape":[`, t.DTypeName)
		for k, d := range t.Shape {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, t.Begin, t.End)
	}
	b.WriteByte('}')
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), out, nil
}
