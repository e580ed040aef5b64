package alloc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// fuzzOp is one operation of a planned-policy program over slots.
type fuzzOp struct {
	code   byte // 0-2 alloc, 3-4 free, 5 RecordStream, 6 special, 7 reset peaks
	slot   int
	size   int64
	stream int
	sub    byte
}

// plannedProgram is the state of runPlannedProgram.
type plannedProgram struct {
	t       *testing.T
	a       *Allocator
	d       *sim.Device
	streams []device.Stream
	held    []bool
	slots   [16]struct {
		p     device.Ptr
		size  int64
		stamp byte
	}
	stamps byte
	ooms   int64
	steps  int
}

// runPlannedProgram executes the operations the bytes describe under the planned policy
// on a small simulated device that keeps data: allocations into 16 slots (a full slot
// is freed first), frees, RecordStream, EmptyCache, TrimIdle, injected device failures,
// held streams, and loops that repeat the latest operations a few times, so that plans
// start, serve, and end by every cause. After every operation it checks the invariants,
// the statistics, that no live allocations overlap and that each still holds the bytes
// written at its ends when it was made; at the end, that everything goes back.
func runPlannedProgram(t *testing.T, data []byte) {
	in := &fuzzInput{data: data}
	x := in.byte()
	cfg := Config{Policy: PolicyPlanned}
	if x&2 != 0 {
		cfg.MaxSplitSize = 20 * MiB
	}
	d, err := sim.New(sim.Options{Capacity: 256 * MiB, Cost: &sim.CostModel{}, Backing: true})
	require.NoError(t, err)
	a, err := New(d, cfg)
	require.NoError(t, err)
	if x&1 != 0 {
		require.NoError(t, a.SetMemoryFraction(0.5+float64(x>>2%5)/10))
	}
	pr := &plannedProgram{t: t, a: a, d: d, streams: []device.Stream{0}}
	for range 2 {
		s, err := d.NewStream()
		require.NoError(t, err)
		pr.streams = append(pr.streams, s)
	}
	pr.held = make([]bool, len(pr.streams))
	var recent []fuzzOp
	for pr.steps < 1500 && in.more() {
		code := in.byte() % 9
		if code == 8 {
			k, n := 1+int(in.byte()%32), 2+int(in.byte()%6)
			body := recent[max(0, len(recent)-k):]
			for range n {
				for _, op := range body {
					pr.exec(op)
				}
			}
			continue
		}
		op := fuzzOp{code: code, slot: int(in.byte() % 16), sub: in.byte()}
		if code < 3 {
			op.size, op.stream = in.size(), int(in.byte())%len(pr.streams)
		}
		pr.exec(op)
		if recent = append(recent, op); len(recent) > 64 {
			recent = recent[1:]
		}
	}
	require.NoError(t, d.SetFaults(sim.Faults{}))
	for i := range pr.slots {
		pr.free(i)
	}
	require.NoError(t, a.EmptyCache(), "waits for the frees still pending on held streams")
	requireDrained(t, a, d)
}

func (pr *plannedProgram) exec(op fuzzOp) {
	t, a, d := pr.t, pr.a, pr.d
	pr.steps++
	switch op.code {
	case 0, 1, 2:
		pr.free(op.slot)
		p, err := a.Alloc(op.size, pr.streams[op.stream])
		if err != nil {
			var oom *OOMError
			require.True(t, errors.As(err, &oom), "step %d: Alloc(%d) failed with %v", pr.steps, op.size, err)
			pr.ooms++
			break
		}
		pr.stamps++
		s := &pr.slots[op.slot]
		s.p, s.size, s.stamp = p, op.size, pr.stamps
		b, ok := d.Bytes(p, op.size)
		require.True(t, ok, "step %d: the block is mapped", pr.steps)
		b[0], b[len(b)-1] = s.stamp, s.stamp
	case 3, 4:
		pr.free(op.slot)
	case 5:
		if p := pr.slots[op.slot].p; p != 0 {
			require.NoError(t, a.RecordStream(p, pr.streams[int(op.sub)%len(pr.streams)]), "step %d", pr.steps)
		}
	case 6:
		switch op.sub % 5 {
		case 0:
			require.NoError(t, a.EmptyCache(), "step %d", pr.steps)
		case 4:
			_, err := a.TrimIdle()
			require.NoError(t, err, "step %d", pr.steps)
		case 1:
			require.NoError(t, d.SetFaults(sim.Faults{Nth: 1 + int64(op.sub>>2%3)}))
		default:
			i := 1 + int(op.sub>>2)%(len(pr.streams)-1)
			if pr.held[i] {
				require.NoError(t, d.ReleaseStream(pr.streams[i]))
			} else {
				require.NoError(t, d.HoldStream(pr.streams[i]))
			}
			pr.held[i] = !pr.held[i]
		}
	case 7:
		a.ResetPeakStats()
	}
	var lives []live
	for i := range pr.slots {
		if s := &pr.slots[i]; s.p != 0 {
			lives = append(lives, live{s.p, s.size})
			pr.checkStamp(i)
		}
	}
	checkProgramStep(t, a, d, pr.steps, lives, pr.ooms)
}

// checkStamp checks that slot i's block still holds its stamp at both ends.
func (pr *plannedProgram) checkStamp(i int) {
	s := &pr.slots[i]
	b, ok := pr.d.Bytes(s.p, s.size)
	require.True(pr.t, ok, "step %d: live block %#x is no longer mapped", pr.steps, s.p)
	require.Equal(pr.t, [2]byte{s.stamp, s.stamp}, [2]byte{b[0], b[len(b)-1]}, "step %d: block %#x lost its bytes", pr.steps, s.p)
}

// free frees slot i's block, if any.
func (pr *plannedProgram) free(i int) {
	s := &pr.slots[i]
	if s.p == 0 {
		return
	}
	require.NoError(pr.t, pr.a.Free(s.p), "step %d", pr.steps)
	s.p = 0
}

// FuzzPlanned drives random programs with loops through the planned policy. Half of
// FuzzAllocator's seed corpus runs in every `go test` (each seed's program checks every
// invariant after each of up to 1,500 operations); `go test -fuzz=FuzzPlanned ./alloc`
// searches on.
func FuzzPlanned(f *testing.F) {
	for i, s := range fuzzSeeds() {
		if i%2 == 0 {
			f.Add(s)
		}
	}
	f.Fuzz(runPlannedProgram)
}
