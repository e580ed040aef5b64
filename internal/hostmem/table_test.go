package hostmem

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

// An unbacked table: ranges are checked, bytes are nil.
func TestTableRanges(t *testing.T) {
	var tb Table
	require.NoError(t, tb.AddAllocation(0x1000, 0x1000, nil))
	require.NoError(t, tb.AddAllocation(0x3000, 0x800, nil))
	require.Error(t, tb.AddAllocation(0x3400, 0x1000, nil), "overlap")
	require.Error(t, tb.AddAllocation(0x0800, 0x1000, nil), "overlap from below")
	require.NoError(t, tb.AddAllocation(0x2000, 0x1000, nil), "adjacent on both sides")

	b, err := tb.Resolve(0x1000, 0x1000)
	require.NoError(t, err)
	assert.Nil(t, b)
	_, err = tb.Resolve(0x1800, 0x1000)
	require.Error(t, err, "runs into the adjacent allocation")
	_, err = tb.Resolve(0x3800, 1)
	require.Error(t, err, "past the end")
	_, err = tb.Resolve(0x0fff, 1)
	require.Error(t, err, "below the first")
	_, err = tb.Resolve(0x1000, 0)
	require.Error(t, err, "empty")
	_, err = tb.Resolve(0x1000, -1<<62)
	require.Error(t, err, "negative")
	_, err = tb.Resolve(0x1000, 1<<62)
	require.Error(t, err, "huge")
	_, ok := tb.Bytes(0x1000, 1)
	assert.False(t, ok, "no host memory")

	size, mem, err := tb.RemoveAllocation(0x2000)
	require.NoError(t, err)
	assert.Equal(t, int64(0x1000), size)
	assert.Nil(t, mem)
	_, _, err = tb.RemoveAllocation(0x2000)
	require.Error(t, err)
	_, _, err = tb.RemoveAllocation(0x1800)
	require.Error(t, err, "not a start")
}

func TestTableReservations(t *testing.T) {
	var tb Table
	const g = 0x100
	require.NoError(t, tb.AddReservation(0x1000, 8*g, nil))
	require.NoError(t, tb.AddAllocation(0x2000, g, nil))
	require.Error(t, tb.Map(0x2000, g, g), "Map into an allocation")
	require.Error(t, tb.Map(0x1000+8*g, g, g), "Map past the reservation")
	require.NoError(t, tb.Map(0x1000+2*g, g, g))
	require.NoError(t, tb.Map(0x1000, g, g))
	require.NoError(t, tb.Map(0x1000+g, g, g), "between two pieces")
	require.Error(t, tb.CheckMap(0x1000+2*g, g, g), "mapped already")
	_, err := tb.Resolve(0x1000+10, 3*g-10)
	require.NoError(t, err, "three adjacent pieces")
	_, err = tb.Resolve(0x1000+10, 3*g-9)
	require.Error(t, err, "one byte into an unmapped granule")
	_, _, err = tb.RemoveAllocation(0x1000)
	require.Error(t, err, "a reservation is not an allocation")
	_, err = tb.RemoveReservation(0x1000, 8*g)
	require.Error(t, err, "pieces mapped")
	for _, off := range []device.Ptr{g, 0, 2 * g} {
		require.NoError(t, tb.Unmap(0x1000+off, g))
	}
	_, err = tb.RemoveReservation(0x1000, 8*g)
	require.NoError(t, err)
	_, _, err = tb.RemoveAllocation(0x2000)
	require.NoError(t, err)
	assert.Empty(t, tb.list())
}

func TestCopierFill(t *testing.T) {
	mem, err := Alloc(3*PageSize() + 5)
	require.NoError(t, err)
	defer func() { require.NoError(t, Free(mem)) }()
	var tb Table
	require.NoError(t, tb.AddAllocation(0x10000, int64(len(mem)), mem))
	c := Copier{Table: &tb, Name: "test", CheckStream: func(string, device.Stream) error { return nil }}
	for _, n := range []int64{1, 2, 3, 1000, int64(len(mem)) - 1} {
		clear(mem)
		require.NoError(t, c.Memset(0x10001, 0xab, n, 0))
		assert.Zero(t, mem[0])
		assert.True(t, bytes.Equal(bytes.Repeat([]byte{0xab}, int(n)), mem[1:1+n]), "n = %d", n)
		if int(1+n) < len(mem) {
			assert.Zero(t, mem[1+n])
		}
	}
	// Overlapping copies within a device behave like memmove.
	copy(mem, "abcdefgh")
	require.NoError(t, c.CopyOnDevice(0x10002, 0x10000, 6, 0))
	assert.Equal(t, "ababcdef", string(mem[:8]))
	err = c.Memset(0x20000, 0, 1, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test: Memset(0x20000")
}

// The Copier checks the stream first (also for zero bytes), then each device range, and
// moves bytes only where the range has host memory.
func TestCopierChecksAndMoves(t *testing.T) {
	mem, err := Alloc(PageSize())
	require.NoError(t, err)
	var tb Table
	require.NoError(t, tb.AddAllocation(0x10000, 64, mem))
	require.NoError(t, tb.AddAllocation(0x20000, 64, nil)) // no host memory: a meta range
	badStream := errors.New("stream 7 is not live")
	c := Copier{Table: &tb, Name: "dev", CheckStream: func(op string, s device.Stream) error {
		if s != 0 {
			return fmt.Errorf("%s: %w", op, badStream)
		}
		return nil
	}}

	require.NoError(t, c.CopyToDevice(0x10008, []byte("sublet"), 0))
	got := make([]byte, 6)
	require.NoError(t, c.CopyToHost(got, 0x10008, 0))
	assert.Equal(t, "sublet", string(got))
	assert.Equal(t, "sublet", string(mem[8:14]), "the bytes are the allocation's host memory")

	// A meta range is checked, and nothing moves.
	got = []byte("xxxxxx")
	require.NoError(t, c.CopyToDevice(0x20000, []byte("abc"), 0))
	require.NoError(t, c.CopyToHost(got, 0x20000, 0))
	assert.Equal(t, "xxxxxx", string(got))
	require.NoError(t, c.Memset(0x20000, 1, 64, 0))
	require.NoError(t, c.CopyOnDevice(0x10000, 0x20000, 8, 0), "from a meta range: nothing to copy")
	assert.Equal(t, "sublet", string(mem[8:14]))

	for name, op := range map[string]func(s device.Stream) error{
		"CopyToDevice": func(s device.Stream) error { return c.CopyToDevice(0x10000, nil, s) },
		"CopyToHost":   func(s device.Stream) error { return c.CopyToHost(nil, 0x10000, s) },
		"CopyOnDevice": func(s device.Stream) error { return c.CopyOnDevice(0x10000, 0x10000, 0, s) },
		"Memset":       func(s device.Stream) error { return c.Memset(0x10000, 0, 0, s) },
	} {
		require.NoError(t, op(0), "%s of zero bytes", name)
		err := op(7)
		require.ErrorIs(t, err, badStream, "%s of zero bytes still checks the stream", name)
		assert.ErrorContains(t, err, name)
	}

	for want, err := range map[string]error{
		"dev: CopyToDevice(0x10038, 9 bytes): destination: range [0x10038, +9) runs past the end": c.CopyToDevice(0x10038, make([]byte, 9), 0),
		"dev: CopyToHost(9 bytes, 0x10038): source: range [0x10038, +9) runs past the end":        c.CopyToHost(make([]byte, 9), 0x10038, 0),
		"dev: CopyOnDevice(0x10000, 0x30000, 8 bytes): source: 0x30000 is not inside":             c.CopyOnDevice(0x10000, 0x30000, 8, 0),
		"dev: CopyOnDevice(0x30000, 0x10000, 8 bytes): destination: 0x30000 is not inside":        c.CopyOnDevice(0x30000, 0x10000, 8, 0),
		"dev: Memset(0x10000, 0, -1 bytes): range [0x10000, +-1) is empty":                        c.Memset(0x10000, 0, -1, 0),
	} {
		assert.ErrorContains(t, err, want)
	}
	assert.Equal(t, "sublet", string(mem[8:14]), "failed copies wrote nothing")
	require.NoError(t, Free(mem))
}

// TestTableLookupsDuringMutations: lookups take no lock, so goroutines resolving a
// live allocation and a mapped piece while another adds and removes allocations and
// maps and unmaps pieces always find them whole (and the race detector sees no
// unsynchronized access).
func TestTableLookupsDuringMutations(t *testing.T) {
	const g = 0x100
	var tb Table
	mem := make([]byte, 0x100)
	require.NoError(t, tb.AddAllocation(0x10000, 0x100, mem))
	require.NoError(t, tb.AddReservation(0x20000, 8*g, nil))
	require.NoError(t, tb.Map(0x20000, g, g))
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if b, err := tb.Resolve(0x10010, 0x20); err != nil || &b[0] != &mem[0x10] {
					errs <- fmt.Errorf("the live allocation: %v", err)
					return
				}
				if _, err := tb.Resolve(0x20000, g); err != nil {
					errs <- fmt.Errorf("the mapped piece: %v", err)
					return
				}
			}
		}()
	}
	for i := range 2000 {
		base := device.Ptr(0x30000 + (i%7)*0x1000)
		require.NoError(t, tb.AddAllocation(base, 0x800, nil))
		require.NoError(t, tb.Map(0x20000+device.Ptr(1+i%7)*g, g, g))
		require.NoError(t, tb.CheckMap(0x20000+device.Ptr(1+(i+1)%7)*g, g, g))
		require.NoError(t, tb.Unmap(0x20000+device.Ptr(1+i%7)*g, g))
		_, _, err := tb.RemoveAllocation(base)
		require.NoError(t, err)
	}
	close(done)
	for range 4 {
		require.NoError(t, <-errs)
	}
}
