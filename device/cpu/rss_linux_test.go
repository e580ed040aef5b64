package cpu

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

// rss is this process's resident set in bytes (/proc/self/statm).
func rss(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	f := strings.Fields(string(data))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

// touch writes every page of [p, p+n) so that it is resident.
func touch(t *testing.T, d *Device, p device.Ptr, n int64) {
	t.Helper()
	b, ok := d.Bytes(p, n)
	require.True(t, ok)
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
}

// The resident set grows by about the touched bytes and falls back on Free and on
// Unmap: the memory is the OS's again, not cached by the Go runtime. The margins (half of
// 64 MiB) leave room for whatever else the process does meanwhile.
const rssBlock, rssMargin = 64 << 20, 32 << 20

func TestFreeReturnsMemoryToOS(t *testing.T) {
	d := newCPU(t, 1<<30)
	before := rss(t)
	p, err := d.Malloc(rssBlock)
	require.NoError(t, err)
	touch(t, d, p, rssBlock)
	touched := rss(t)
	require.Greater(t, touched-before, int64(rssMargin), "touching 64 MiB makes it resident")
	require.NoError(t, d.Free(p))
	require.Greater(t, touched-rss(t), int64(rssMargin), "Free gives the 64 MiB back to the OS")
	_, ok := d.Bytes(p, 1)
	require.False(t, ok)
}

func TestUnmapReturnsMemoryToOS(t *testing.T) {
	d := newCPU(t, 1<<30)
	r, err := d.Reserve(2 * rssBlock)
	require.NoError(t, err)
	before := rss(t)
	require.NoError(t, d.Map(r, rssBlock))
	touch(t, d, r, rssBlock)
	touched := rss(t)
	require.Greater(t, touched-before, int64(rssMargin), "touching 64 MiB makes it resident")
	require.NoError(t, d.Unmap(r, rssBlock))
	require.Greater(t, touched-rss(t), int64(rssMargin), "Unmap gives the 64 MiB back to the OS")
	_, ok := d.Bytes(r, 1)
	require.False(t, ok)
	// Mapped again, the range reads as zeros.
	require.NoError(t, d.Map(r, rssBlock))
	b, ok := d.Bytes(r, rssBlock)
	require.True(t, ok)
	require.Zero(t, b[0])
	require.NoError(t, d.Unmap(r, rssBlock))
	require.NoError(t, d.Unreserve(r, 2*rssBlock))
	free, _, err := d.MemInfo()
	require.NoError(t, err)
	require.Equal(t, int64(1<<30), free)
}
