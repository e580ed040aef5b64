// Package devicetest is the conformance suite every device.Device runs from its own
// tests: devicetest.Run(t, newDevice, devicetest.Config{...}). It checks only what
// package device promises, observing data through CopyToHost (never HostMemory), so the
// same suite runs on the CPU, the simulated device (with and without backing store) and
// a GPU. Every subtest gets a fresh device from newDevice and ends by checking that the
// device holds no memory any more (exactly, where Config.ExactMemInfo says it can).
package devicetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

// Config tells the suite what it can expect of a device beyond the interfaces.
type Config struct {
	// KeepsData: copies and memsets move bytes (false for the simulated device without
	// backing store, whose copies only check their ranges).
	KeepsData bool
	// ExactMemInfo: nothing but this device changes MemInfo's free bytes, and each
	// allocation lowers them by its size rounded up to AllocUnit. Then the suite checks
	// the accounting exactly and fills the device to provoke OOM; otherwise it only
	// checks that a request above the total fails with ErrOutOfMemory.
	ExactMemInfo bool
	// AllocUnit is what MemInfo rounds each Malloc up to (1 or 0: exact size).
	AllocUnit int64
}

func (c Config) unit() int64 { return max(c.AllocUnit, 1) }

// charged is what MemInfo is lowered by for a Malloc of size bytes.
func (c Config) charged(size int64) int64 {
	u := c.unit()
	return (size + u - 1) / u * u
}

// Run runs the suite. newDevice returns a fresh device for each subtest (it may register
// cleanups on the t it is given).
func Run(t *testing.T, newDevice func(t *testing.T) device.Device, c Config) {
	s := suite{newDevice: newDevice, c: c}
	t.Run("MallocFree", s.mallocFree)
	t.Run("MallocErrors", s.mallocErrors)
	t.Run("OutOfMemory", s.outOfMemory)
	t.Run("Streams", s.streams)
	t.Run("Events", s.events)
	t.Run("Copies", s.copies)
	t.Run("CopyRanges", s.copyRanges)
	t.Run("VirtualMemory", s.virtualMemory)
	t.Run("HostMemory", s.hostMemory)
	t.Run("Concurrency", s.concurrency)
}

type suite struct {
	newDevice func(t *testing.T) device.Device
	c         Config
}

// session is one subtest's device and the free bytes it started with.
type session struct {
	t     *testing.T
	d     device.Device
	c     Config
	free0 int64
	total int64
}

func (s suite) open(t *testing.T) *session {
	d := s.newDevice(t)
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	require.Positive(t, total)
	require.LessOrEqual(t, free, total)
	return &session{t: t, d: d, c: s.c, free0: free, total: total}
}

// free returns MemInfo's free bytes.
func (x *session) free() int64 {
	f, _, err := x.d.MemInfo()
	require.NoError(x.t, err)
	return f
}

// expectUsed checks that the device holds exactly used bytes more than at the start,
// where MemInfo is exact.
func (x *session) expectUsed(used int64) {
	x.t.Helper()
	if x.c.ExactMemInfo {
		require.Equal(x.t, x.free0-used, x.free(), "MemInfo free bytes with %d bytes in use", used)
	}
}

// malloc allocates size bytes and checks the alignment.
func (x *session) malloc(size int64) device.Ptr {
	x.t.Helper()
	p, err := x.d.Malloc(size)
	require.NoError(x.t, err, "Malloc(%d)", size)
	require.NotZero(x.t, p)
	require.Zero(x.t, uintptr(p)%512, "Malloc(%d) = %#x is not 512-byte aligned", size, uintptr(p))
	return p
}

// pattern is n bytes that differ from their neighbours and from other seeds.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ byte(i>>8) ^ seed
	}
	return b
}

// read copies n bytes at p back to the host.
func (x *session) read(p device.Ptr, n int) []byte {
	x.t.Helper()
	b := make([]byte, n)
	require.NoError(x.t, x.d.CopyToHost(b, p, 0))
	return b
}
