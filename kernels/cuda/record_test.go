package cuda

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// newRecording returns a Backend that records instead of running, with a simulated
// device's allocator for its cuBLAS workspaces (1 MiB each).
func newRecording(t testing.TB) (*Backend, *recorder) { return newRecordingOn(t, sim.Options{}) }

// newRecordingOn is newRecording with a simulated device of o.
func newRecordingOn(t testing.TB, o sim.Options) (*Backend, *recorder) {
	d, err := sim.New(o)
	require.NoError(t, err)
	al, err := alloc.For(d)
	require.NoError(t, err)
	rec := &recorder{}
	b := &Backend{al: al, sms: 132, scratch: make(map[device.Stream]*scratch), rec: rec}
	b.blas.b, b.blas.wsBytes = b, 1<<20
	return b, rec
}

// walkOf decodes a recorded Walk argument.
func walkOf(t testing.TB, a argRec) walk {
	var w walk
	require.Len(t, a.bytes, int(unsafe.Sizeof(w)))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&w)), unsafe.Sizeof(w)), a.bytes)
	return w
}

// reductionOf decodes a recorded Reduction argument.
func reductionOf(t testing.TB, a argRec) reduction {
	var r reduction
	require.Len(t, a.bytes, int(unsafe.Sizeof(r)))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), a.bytes)
	return r
}

// operands hands out operands over made-up, disjoint device blocks.
type operands struct{ next device.Ptr }

// dense is a contiguous operand of dt and shape in a block of its own.
func (o *operands) dense(dt dtype.DType, shape ...int) kernels.Operand {
	l := kernels.Contiguous(shape...)
	return o.over(dt, l, int64(max(l.Span(), 1)))
}

// over is an operand of dt placed by l in a block of n elements.
func (o *operands) over(dt dtype.DType, l kernels.Layout, n int64) kernels.Operand {
	o.next += 1 << 32
	return kernels.Operand{Layout: l, DType: dt, Mem: kernels.Mem{Ptr: o.next, Size: n * int64(dt.Size())}}
}

// ptxParam is one parameter of a PTX entry point: its PTX type (b8 for a by-value
// struct) and size in bytes.
type ptxParam struct {
	typ  string
	size int
}

// skipWithoutPTX skips a test that reads the reviewed PTX text of gen/ where a copy of
// the tree lacks it: the GPU suite's machine runs test binaries with the kernels
// compiled in, and the tree sent there leaves gen/*.ptx behind to stay within the
// device's carry. CI, on a whole checkout, runs these tests.
func skipWithoutPTX(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("gen/" + familyNames[0] + ".ptx"); errors.Is(err, fs.ErrNotExist) {
		t.Skip("gen/*.ptx is not in this copy of the tree (the GPU suite's); CI checks it")
	}
}

// ptxParams maps every entry point of gen/*.ptx to its parameters.
func ptxParams(t testing.TB) map[string][]ptxParam {
	skipWithoutPTX(t)
	entry := regexp.MustCompile(`(?s)\.entry (\w+)\(\s*(.*?)\)`)
	param := regexp.MustCompile(`\.param (?:\.align \d+ )?\.(\w+) \w+(?:\[(\d+)\])?`)
	sizes := map[string]int{"u32": 4, "s32": 4, "f32": 4, "b32": 4, "u64": 8, "s64": 8, "f64": 8, "b64": 8}
	out := map[string][]ptxParam{}
	for _, f := range familyNames {
		src, err := os.ReadFile("gen/" + f + ".ptx")
		require.NoError(t, err)
		for _, m := range entry.FindAllStringSubmatch(string(src), -1) {
			var ps []ptxParam
			for _, line := range strings.Split(m[2], ",") {
				p := param.FindStringSubmatch(line)
				require.NotNil(t, p, "%s: parameter %q", m[1], line)
				if p[1] == "b8" {
					ps = append(ps, ptxParam{p[1], atoi(t, p[2])})
				} else {
					require.Contains(t, sizes, p[1], "%s: parameter type %s", m[1], p[1])
					ps = append(ps, ptxParam{p[1], sizes[p[1]]})
				}
			}
			out[m[1]] = ps
		}
	}
	return out
}

func atoi(t testing.TB, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
