package cuda

import (
	_ "embed"
	"encoding/binary"
	"math"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

//go:embed testdata/args.fatbin
var argsFatbin []byte

// small and large are testdata/args.cu's structs, field for field.
type small struct {
	n int32
	x float32
}

type large struct {
	dst   uint64
	count int32
	_     int32
	vals  [250]float32
	d     float64
}

func bytesOf[T any](v *T) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v)) }

func TestArgBytesPacking(t *testing.T) {
	assert.Equal(t, []int{4, 4, 8, 8, 8, 4, 8}, []int{ArgInt32(-1).Size(), ArgUint32(1).Size(), ArgInt64(1).Size(),
		ArgUint64(1).Size(), ArgPtr(1).Size(), ArgFloat32(1).Size(), ArgFloat64(1).Size()})
	assert.Nil(t, ArgInt32(3).Bytes())
	assert.Equal(t, uint64(3), ArgInt32(3).Bits())

	p := newLaunchParams().(*launchParams)
	s := small{n: 7, x: 1.5}
	var l large
	l.count = 3
	args := []Arg{ArgFloat32(2), ArgBytes(bytesOf(&s)), ArgBytes(bytesOf(&l)), ArgUint64(9)}
	assert.Equal(t, int(unsafe.Sizeof(l)), args[2].Size())
	assert.Equal(t, bytesOf(&s), args[1].Bytes())
	used, err := p.pack(args)
	require.NoError(t, err)
	assert.Equal(t, 8+int(unsafe.Sizeof(l)), used, "the second struct starts on the next 8-byte boundary")
	assert.Equal(t, unsafe.Pointer(&p.vals[0]), p.ptrs[0])
	assert.Equal(t, unsafe.Pointer(&p.blob[0]), p.ptrs[1])
	assert.Equal(t, unsafe.Pointer(&p.blob[8]), p.ptrs[2])
	assert.Equal(t, unsafe.Pointer(&p.vals[3]), p.ptrs[3])
	assert.Equal(t, int32(7), int32(binary.LittleEndian.Uint32(p.blob[0:])))
	assert.Equal(t, float32(1.5), math.Float32frombits(binary.LittleEndian.Uint32(p.blob[4:])))
	assert.Equal(t, int32(3), int32(binary.LittleEndian.Uint32(p.blob[16:])))

	// A block reused for scalars points at its values again.
	_, err = p.pack([]Arg{ArgInt32(1), ArgInt32(2)})
	require.NoError(t, err)
	assert.Equal(t, unsafe.Pointer(&p.vals[1]), p.ptrs[1])

	big := make([]byte, MaxArgBytes-4)
	_, err = p.pack([]Arg{ArgBytes(big[:8]), ArgBytes(big)})
	require.ErrorContains(t, err, "at most 4096")

	allocs := testing.AllocsPerRun(100, func() {
		s := small{n: 1}
		var l large
		if _, err := p.pack([]Arg{ArgBytes(bytesOf(&s)), ArgBytes(bytesOf(&l)), ArgPtr(1)}); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "packing struct arguments allocates nothing")
}

func TestLoadFatbinRefusesOtherImages(t *testing.T) {
	d := &Device{name: "cuda:test"}
	_, err := d.LoadFatbin([]byte(".version 7.8\n.target sm_80\n"))
	require.ErrorContains(t, err, "not a fatbin")
	assert.Equal(t, uint32(fatbinMagic), binary.LittleEndian.Uint32(argsFatbin), "testdata/args.fatbin is a fatbin")
}

func TestOpenLibrary(t *testing.T) {
	_, err := OpenLibrary("libsublet-no-such.so.1", "/nonexistent/libnothing.so")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "libsublet-no-such.so.1")
	assert.Contains(t, err.Error(), "/nonexistent/libnothing.so")
	if runtime.GOOS != "linux" {
		t.Skip("libc.so.6 is linux's")
	}
	lib, err := OpenLibrary("libsublet-no-such.so.1", "libc.so.6")
	require.NoError(t, err)
	assert.Equal(t, "libc.so.6", lib.Path())
	_, err = lib.Symbol("getpid")
	require.NoError(t, err)
	_, err = lib.Symbol("sublet_no_such_symbol")
	require.ErrorContains(t, err, "libc.so.6 has no symbol sublet_no_such_symbol")
}

func TestStructArgsFromFatbin(t *testing.T) {
	d := openTest(t)
	m, err := d.LoadFatbin(argsFatbin)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Unload()) }()
	f, err := m.Function("struct_args")
	require.NoError(t, err)
	attr, err := f.Attributes()
	require.NoError(t, err)
	t.Logf("struct_args: %+v", attr)
	assert.Zero(t, attr.LocalBytes, "no spills")
	p := d.Properties()
	assert.Equal(t, 10*p.ComputeMajor+p.ComputeMinor, attr.BinaryVersion, "the fatbin has SASS for this GPU")

	const count = 250
	out := malloc(t, d, 4*(count+4))
	s := small{n: -5, x: 0.25}
	l := large{dst: uint64(out), count: count, d: 6.5}
	for i := range l.vals {
		l.vals[i] = float32(i)
	}
	require.NoError(t, d.Launch(f, LaunchConfig{Block: Dim3{X: 256}}, ArgBytes(bytesOf(&s)), ArgBytes(bytesOf(&l)), ArgFloat32(2), ArgUint64(42)))
	got := make([]byte, 4*(count+4))
	require.NoError(t, d.CopyToHost(got, out, 0))
	v := func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])) }
	for i := range count {
		require.Equal(t, float32(2*i), v(i), "vals[%d]", i)
	}
	assert.Equal(t, []float32{-5, 0.25, 6.5, 42}, []float32{v(count), v(count + 1), v(count + 2), v(count + 3)})
}
