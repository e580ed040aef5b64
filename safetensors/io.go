package safetensors

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/tensor"
)

// Named is a tensor and the name it has in a file.
type Named struct {
	Name   string
	Tensor *tensor.Tensor
}

// Write writes ts and metadata (nil: none) to w as a safetensors file. Each tensor is
// copied to the host when its turn comes, so one tensor's bytes are on the host at a
// time; the copy from a GPU waits for the device. The tensors are only read. It fails
// for a tensor of a type the format has no name for, for names that are empty, taken
// twice or "__metadata__", and for a tensor on a device that keeps no data (meta).
func Write(w io.Writer, ts []Named, metadata map[string]string) error {
	infos := make([]Info, len(ts))
	byName := make(map[string]*tensor.Tensor, len(ts))
	for i, nt := range ts {
		t := nt.Tensor
		if t == nil || t.Released() {
			return fmt.Errorf("safetensors: Write: tensor %q is nil or released", nt.Name)
		}
		n, ok := names[t.DType()]
		if !ok {
			return fmt.Errorf("safetensors: Write: tensor %q is %v, which the format has no name for", nt.Name, t.DType())
		}
		if t.Numel() > 0 && t.Device().Residency() == device.Meta {
			return fmt.Errorf("safetensors: Write: tensor %q is on %s, which keeps no data", nt.Name, t.Device().Name())
		}
		infos[i] = Info{Name: nt.Name, DType: t.DType(), DTypeName: n, Shape: t.Shape(), End: t.Bytes()}
		byName[nt.Name] = t
	}
	h, layout, err := buildHeader(infos, metadata)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	bw.Write(n[:])
	bw.Write(h)
	var buf []byte
	for _, info := range layout {
		t := byName[info.Name]
		if int64(cap(buf)) < info.Bytes() {
			buf = make([]byte, info.Bytes())
		}
		b := buf[:info.Bytes()]
		if err := tensor.Try(func() {
			if t.CopyToHost(b) {
				err = t.Device().SynchronizeStream(0)
			}
		}); err != nil {
			return fmt.Errorf("safetensors: Write: reading tensor %q: %w", info.Name, err)
		}
		if err != nil {
			return fmt.Errorf("safetensors: Write: waiting for tensor %q: %w", info.Name, err)
		}
		if _, err := bw.Write(b); err != nil {
			return fmt.Errorf("safetensors: Write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: Write: %w", err)
	}
	return nil
}

// WriteFile writes ts and metadata to the file at path (see Write), replacing it only
// once the whole file is written: a failed write leaves what was there.
func WriteFile(path string, ts []Named, metadata map[string]string) error {
	return writeFile(path, func(w io.Writer) error { return Write(w, ts, metadata) })
}

// writeFile writes the file at path through a temporary file renamed into place.
func writeFile(path string, write func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".safetensors-*")
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	tmp := f.Name()
	err = write(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("safetensors: %w", cerr)
	}
	if err == nil {
		if rerr := os.Rename(tmp, path); rerr != nil {
			err = fmt.Errorf("safetensors: %w", rerr)
		}
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Reader reads the tensors of a safetensors file, one at a time, from an io.ReaderAt.
// NewReader has checked the whole header. It is safe for concurrent reads when r is.
type Reader struct {
	r        io.ReaderAt
	data     int64 // where the data starts
	tensors  []Info
	byName   map[string]int
	metadata map[string]string
}

// NewReader reads and checks the header of the size bytes of r.
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	var nb [8]byte
	if size < 8 {
		return nil, formatErr("%d bytes: a file has at least the 8 of its header's length", size)
	}
	if _, err := r.ReadAt(nb[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: reading the header's length: %w", err)
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n > MaxHeader {
		return nil, formatErr("a header of %d bytes: at most %d are read", n, MaxHeader)
	}
	if int64(n) > size-8 {
		return nil, formatErr("a header of %d bytes in a file of %d", n, size)
	}
	h := make([]byte, n)
	if _, err := r.ReadAt(h, 8); err != nil {
		return nil, fmt.Errorf("safetensors: reading the header: %w", err)
	}
	hd, err := parseHeader(h, size-8-int64(n))
	if err != nil {
		return nil, err
	}
	rd := &Reader{r: r, data: 8 + int64(n), tensors: hd.tensors, metadata: hd.metadata, byName: make(map[string]int, len(hd.tensors))}
	for i, t := range hd.tensors {
		rd.byName[t.Name] = i
	}
	return rd, nil
}

// File is a Reader over an open file; Close it.
type File struct {
	*Reader
	f *os.File
}

// Open opens the safetensors file at path and checks its header.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	r, err := NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{Reader: r, f: f}, nil
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Tensors describes the file's tensors, in the order of their data.
func (r *Reader) Tensors() []Info {
	out := slices.Clone(r.tensors)
	for i := range out {
		out[i].Shape = slices.Clone(out[i].Shape)
	}
	return out
}

// Metadata is the file's __metadata__ (empty when it has none).
func (r *Reader) Metadata() map[string]string { return maps.Clone(r.metadata) }

// Info describes the tensor called name.
func (r *Reader) Info(name string) (Info, bool) {
	i, ok := r.byName[name]
	if !ok {
		return Info{}, false
	}
	t := r.tensors[i]
	t.Shape = slices.Clone(t.Shape)
	return t, true
}

// ErrNotFound is wrapped by the errors for a name the file does not hold.
var ErrNotFound = errors.New("no tensor of that name in the file")

// Bytes reads the data of the tensor called name into a new slice.
func (r *Reader) Bytes(name string) ([]byte, error) {
	info, ok := r.Info(name)
	if !ok {
		return nil, fmt.Errorf("safetensors: %q: %w", name, ErrNotFound)
	}
	b := make([]byte, info.Bytes())
	if _, err := r.r.ReadAt(b, r.data+info.Begin); err != nil {
		return nil, fmt.Errorf("safetensors: reading tensor %q: %w", name, err)
	}
	return b, nil
}

// Load reads the tensor called name into a new tensor on dev owned by s.
func (r *Reader) Load(s *tensor.Scope, dev device.Device, name string) (*tensor.Tensor, error) {
	info, b, err := r.tensorBytes(name)
	if err != nil {
		return nil, err
	}
	var t *tensor.Tensor
	if err := tensor.Try(func() { t = tensor.FromBytes(s, dev, info.DType, b, info.Shape...) }); err != nil {
		return nil, fmt.Errorf("safetensors: loading tensor %q: %w", name, err)
	}
	return t, synced(dev, name)
}

// LoadInto reads the tensor called name into dst in place (tensor.SetBytes): dst must
// have its shape and type (no conversion) and be contiguous.
func (r *Reader) LoadInto(dst *tensor.Tensor, name string) error {
	info, b, err := r.tensorBytes(name)
	if err != nil {
		return err
	}
	if err := fits(info, dst); err != nil {
		return err
	}
	if err := tensor.Try(func() { dst.SetBytes(b) }); err != nil {
		return fmt.Errorf("safetensors: loading tensor %q: %w", name, err)
	}
	return synced(dst.Device(), name)
}

// fits checks that dst can take the tensor info describes.
func fits(info Info, dst *tensor.Tensor) error {
	if info.DType != dst.DType() || !slices.Equal(info.Shape, dst.Shape()) {
		return fmt.Errorf("safetensors: tensor %q is %s %v in the file, %v %v here", info.Name, info.DTypeName, info.Shape,
			dst.DType(), dst.Shape())
	}
	return nil
}

// tensorBytes reads the tensor called name, which must be of a type sublet has.
func (r *Reader) tensorBytes(name string) (Info, []byte, error) {
	info, ok := r.Info(name)
	if !ok {
		return Info{}, nil, fmt.Errorf("safetensors: %q: %w", name, ErrNotFound)
	}
	if !info.DType.IsValid() {
		return Info{}, nil, fmt.Errorf("safetensors: tensor %q is %s, a type sublet has no tensors of; read its Bytes", name, info.DTypeName)
	}
	b, err := r.Bytes(name)
	return info, b, err
}

// synced waits for an asynchronous copy from the host buffer the caller drops next.
func synced(dev device.Device, name string) error {
	if _, ok := dev.(device.PinnedHost); !ok {
		return nil
	}
	if err := dev.SynchronizeStream(0); err != nil {
		return fmt.Errorf("safetensors: waiting for tensor %q: %w", name, err)
	}
	return nil
}
