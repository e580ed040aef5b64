package cuda

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MakeCurrent leaves the context current on a locked thread, whatever was current there
// before.
func TestMakeCurrentOnALockedThread(t *testing.T) {
	d := openTest(t)
	current := func() uintptr {
		var ctx uintptr
		require.Equal(t, success, syscallN(d.drv.cuCtxGetCurrent, uintptr(unsafe.Pointer(&ctx))))
		return ctx
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var none uintptr
	require.Equal(t, success, syscallN(d.drv.cuCtxSetCurrent, none))
	assert.Zero(t, current(), "no context after setting none")
	require.NoError(t, d.MakeCurrent())
	assert.Equal(t, d.ctx, current())
}
