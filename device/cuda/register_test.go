package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/internal/hostmem"
)

// Memory page-locked in place serves asynchronous copies like HostAlloc memory: they
// wait behind a held stream instead of completing before the call returns.
func TestHostRegisterAsyncCopies(t *testing.T) {
	d := openTest(t)
	const n = 4 << 20
	src, err := hostmem.Alloc(n)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, hostmem.Free(src)) })
	dst := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	require.NoError(t, d.HostRegister(src))
	assert.Equal(t, Usage{HostRegistrations: 1, RegisteredBytes: n}, d.Usage())
	err = d.HostRegister(src)
	var ce *Error
	require.ErrorAs(t, err, &ce, "registered twice: the driver refuses")
	assert.Contains(t, ce.Op, "cuMemHostRegister")
	assert.Equal(t, Usage{HostRegistrations: 1, RegisteredBytes: n}, d.Usage())

	p := malloc(t, d, n)
	s := newStream(t, d)
	release := holdStream(t, d, s)
	require.NoError(t, d.CopyToDeviceAsync(p, src, s))
	e, err := d.NewEvent()
	require.NoError(t, err)
	require.NoError(t, d.RecordEvent(e, s))
	done, err := d.QueryEvent(e)
	require.NoError(t, err)
	assert.False(t, done, "the copy from registered memory waits behind the held stream")
	assert.True(t, release())
	require.NoError(t, d.SynchronizeEvent(e))
	require.NoError(t, d.DestroyEvent(e))
	require.NoError(t, d.CopyToHost(dst, p, s))
	require.Equal(t, src, dst)

	assert.ErrorContains(t, d.HostUnregister(src[:n/2]), "not a whole live HostRegister range")
	require.NoError(t, d.HostUnregister(src))
	assert.ErrorContains(t, d.HostUnregister(src), "not a whole live HostRegister range")
	assert.ErrorContains(t, d.HostRegister(nil), "empty slice")
	assert.ErrorContains(t, d.HostUnregister(nil), "not a whole live HostRegister range")
}
