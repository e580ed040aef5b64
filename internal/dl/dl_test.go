package dl

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// libc opens the C library, or skips where this platform has none that loads here.
func libc(t *testing.T) uintptr {
	t.Helper()
	if !Supported || runtime.GOOS != "linux" {
		t.Skipf("no libc.so.6 to load on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	h, err := Open("libsublet-nonexistent.so.9", "libc.so.6")
	if err != nil {
		t.Skip("no glibc here:", err)
	}
	return h
}

func TestOpenTriesEachNameAndCallsAnEntryPoint(t *testing.T) {
	h := libc(t)
	getpid, err := Symbol(h, "getpid")
	require.NoError(t, err)
	assert.Equal(t, uintptr(os.Getpid()), Call(getpid), "the second name loaded: the call reaches libc")

	strlen, err := Symbol(h, "strlen")
	require.NoError(t, err)
	var length func(string) int
	Bind(&length, strlen)
	assert.Equal(t, 6, length("sublet"), "Bind converts a Go string to a C one")

	_, err = Symbol(h, "sublet_no_such_symbol")
	assert.ErrorContains(t, err, "sublet_no_such_symbol")
}

func TestOpenNamesTheFirstFailure(t *testing.T) {
	_, err := Open("libsublet-nonexistent.so.9", "libsublet-other.so.1")
	require.Error(t, err)
	if Supported {
		assert.Contains(t, err.Error(), "libsublet-nonexistent.so.9")
	} else {
		assert.ErrorIs(t, err, ErrUnsupported)
		assert.Contains(t, err.Error(), runtime.GOOS+"/"+runtime.GOARCH)
	}
	_, err = Open()
	assert.Error(t, err, "no name, no library")
}

// TestCallArgsAllocatesNothing: Call's variadic arguments escape to the heap on every
// call (go:uintptrescapes); CallArgs, for the driver's hot paths, allocates nothing.
func TestCallArgsAllocatesNothing(t *testing.T) {
	labs, err := Symbol(libc(t), "labs")
	require.NoError(t, err)
	args := make([]uintptr, 1) // on the heap, as a pooled block is
	var got uintptr
	allocs := testing.AllocsPerRun(100, func() {
		args[0] = uintptr(^uint(6)) // -7
		got = CallArgs(labs, args)
	})
	assert.Equal(t, uintptr(7), got)
	assert.Zero(t, allocs, "CallArgs")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { got = Call(labs, 7) }), "Call, whose arguments escape")
}
