package alloc

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// Many goroutines allocate, record streams and free on one allocator while another
// reads its statistics, empties its cache and holds a stream now and then. Run under
// -race in CI.
func TestConcurrentUse(t *testing.T) {
	for _, cfg := range []Config{{}, {ExpandableSegments: true, MaxSplitSize: 24 * MiB}} {
		a, d := newAlloc(t, 0, cfg)
		streams := []device.Stream{0, newStream(t, d, false), newStream(t, d, false)}
		const workers, steps = 8, 300
		var wg sync.WaitGroup
		errs := make(chan error, workers+2)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := churn{x: uint64(w) + 1}
				var live []device.Ptr
				for range steps {
					c.x = c.x*6364136223846793005 + 1442695040888963407
					if len(live) > 6 || (len(live) > 0 && c.x>>60 < 6) {
						p := live[len(live)-1]
						live = live[:len(live)-1]
						if err := a.Free(p); err != nil {
							errs <- err
							return
						}
						continue
					}
					s := streams[(c.x>>20)%3]
					p, err := a.Alloc(int64(512*(1+(c.x>>17)%8192)), s)
					if err != nil {
						errs <- err
						return
					}
					if c.x>>59&1 == 0 {
						if err := a.RecordStream(p, streams[(c.x>>30)%3]); err != nil {
							errs <- err
							return
						}
					}
					live = append(live, p)
				}
				for _, p := range live {
					if err := a.Free(p); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		stop := make(chan struct{})
		var readers sync.WaitGroup
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = a.Summary(false)
				_ = a.Snapshot()
				if err := a.EmptyCache(); err != nil {
					errs <- err
					return
				}
				// Hold a stream for a while: its frees stay pending until Alloc's event
				// processing or EmptyCache sees them complete.
				if err := errors.Join(d.HoldStream(streams[1]), a.EmptyCache(), d.ReleaseStream(streams[1])); err != nil {
					errs <- err
					return
				}
			}
		}()
		wg.Wait()
		close(stop)
		readers.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		requireDrained(t, a, d)
	}
}

// With raw allocations failing at random, every failed request is an OOMError and no
// block is lost.
func TestInjectedFailuresLoseNothing(t *testing.T) {
	for _, cfg := range []Config{{}, {MaxSplitSize: 20 * MiB}, {ExpandableSegments: true}, {RoundupPower2Divisions: fill(4), GarbageCollectionThreshold: 0.5}} {
		d, err := sim.New(sim.Options{Capacity: 512 * MiB, Cost: &sim.CostModel{}, Faults: sim.Faults{Prob: 0.3, Seed: 9}})
		require.NoError(t, err)
		a, err := New(d, cfg)
		require.NoError(t, err)
		if cfg.GarbageCollectionThreshold > 0 {
			require.NoError(t, a.SetMemoryFraction(0.8))
		}
		c := churn{x: 5}
		var failed, served int
		for range 3000 {
			c.x = c.x*6364136223846793005 + 1442695040888963407
			s := (c.x >> 33) % 64
			if c.slot[s] != 0 {
				require.NoError(t, a.Free(c.slot[s]))
				c.slot[s] = 0
				continue
			}
			p, err := a.Alloc(int64(512*(1+(c.x>>17)%32768)), 0)
			if err != nil {
				var oom *OOMError
				require.True(t, errors.As(err, &oom), "%v", err)
				if cfg.GarbageCollectionThreshold == 0 { // no fraction: only the device refuses
					require.ErrorIs(t, err, device.ErrOutOfMemory)
				}
				failed++
				continue
			}
			served++
			c.slot[s] = p
		}
		checkInvariants(t, a)
		assert.Positive(t, failed, "%+v: some requests failed", cfg)
		assert.Positive(t, served)
		assert.Equal(t, int64(failed), a.Stats().NumOOMs)
		require.NoError(t, d.SetFaults(sim.Faults{}))
		for _, p := range c.slot {
			if p != 0 {
				require.NoError(t, a.Free(p))
			}
		}
		requireDrained(t, a, d)
	}
}

func TestForReturnsOneAllocatorPerDevice(t *testing.T) {
	t.Setenv(ConfigEnv, "max_split_size_mb:64")
	d := newSim(t, 0)
	a, err := For(d)
	require.NoError(t, err)
	b, err := For(d)
	require.NoError(t, err)
	assert.Same(t, a, b)
	assert.Equal(t, int64(64*MiB), a.Config().MaxSplitSize, "SUBLET_ALLOC_CONF is read on first use")
	assert.Same(t, d, a.Device().(*sim.Device))
	other, err := For(newSim(t, 0))
	require.NoError(t, err)
	assert.NotSame(t, a, other)

	t.Setenv(ConfigEnv, "bad")
	_, err = For(newSim(t, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), ConfigEnv)
	_, err = For(nil)
	require.Error(t, err)

	c, err := ForConfig(d, Config{MaxSplitSize: 64 * MiB})
	require.NoError(t, err)
	assert.Same(t, a, c, "the same configuration: the existing allocator")
	_, err = ForConfig(d, Config{})
	require.Error(t, err, "another configuration for a device that has its allocator")
	d2 := newSim(t, 0)
	e, err := ForConfig(d2, Config{ExpandableSegments: true})
	require.NoError(t, err)
	assert.True(t, e.Config().ExpandableSegments)
	_, err = For(uncomparableDevice{Device: d2})
	require.Error(t, err, "a device value that cannot be a map key")
	requireDrained(t, a, d)
	requireDrained(t, e, d2)
}

// uncomparableDevice is a device value that cannot be compared.
type uncomparableDevice struct {
	device.Device
	_ []int
}

// TestForFromManyGoroutines: goroutines asking at once for a new device's allocator
// get one allocator, registered once.
func TestForFromManyGoroutines(t *testing.T) {
	d := newSim(t, 0)
	got := make([]*Allocator, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := For(d)
			assert.NoError(t, err)
			got[i] = a
		}()
	}
	wg.Wait()
	for _, a := range got {
		assert.Same(t, got[0], a)
	}
	n := 0
	for _, a := range Registered() {
		if a.Device() == device.Device(d) {
			n++
		}
	}
	assert.Equal(t, 1, n, "registered once")
}
