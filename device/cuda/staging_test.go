package cuda

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStagedCopies: copies from pageable memory large enough to be staged through the
// pinned buffers (a size that is no multiple of a chunk, at an offset into the
// allocation), from several goroutines at once on their own streams, arrive whole; a
// copy from pinned memory is not staged; Usage does not count the staging buffers.
func TestStagedCopies(t *testing.T) {
	d := openTest(t)
	const n = 2*stageChunk + 12345
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newStream(t, d)
			p := malloc(t, d, n+4096)
			src := make([]byte, n)
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			assert.NoError(t, d.CopyToDevice(p+4096, src, s))
			got := make([]byte, n)
			assert.NoError(t, d.CopyToHost(got, p+4096, s))
			assert.Equal(t, src, got, "goroutine %d", g)
		}()
	}
	wg.Wait()
	assert.Equal(t, Usage{}, func() Usage { u := d.Usage(); u.Mallocs, u.MallocBytes = 0, 0; return u }(), "no staging buffer counted")

	h, err := d.HostAlloc(4 << 20)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.HostFree(h)) }()
	assert.True(t, d.pinned(h[1:]))
	assert.False(t, d.pinned(make([]byte, 16)))
	p := malloc(t, d, int64(len(h)))
	start := time.Now()
	require.NoError(t, d.CopyToDevice(p, h, 0))
	t.Logf("4 MiB from pinned memory in %v", time.Since(start))
}

// BenchmarkCopyToDevicePageable is a 64 MB upload from a Go slice (staged) and from
// pinned memory, as bytes per second.
func BenchmarkCopyToDevicePageable(b *testing.B) {
	d := openTest(b)
	const n = 64 << 20
	p := malloc(b, d, n)
	src := make([]byte, n)
	b.Run("pageable", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			if err := d.CopyToDevice(p, src, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	h, err := d.HostAlloc(n)
	require.NoError(b, err)
	defer func() { require.NoError(b, d.HostFree(h)) }()
	b.Run("pinned", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			if err := d.CopyToDevice(p, h, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
