package sim

import (
	"fmt"
	"math/rand/v2"
)

// Faults selects raw allocations (Malloc and Map calls, counted together, 1-based) that
// fail as if the device were out of memory. Only calls with valid arguments count. The
// zero Faults injects nothing.
type Faults struct {
	// Nth fails the Nth raw allocation; 0 fails none.
	Nth int64
	// Every, with Nth, fails every Nth raw allocation (N, 2N, 3N, ...).
	Every bool
	// Prob fails each raw allocation with this probability, in [0, 1].
	Prob float64
	// Seed seeds the generator behind Prob: the same seed fails the same calls.
	Seed uint64
}

func (f Faults) validate() error {
	if f.Nth < 0 {
		return fmt.Errorf("sim: Faults.Nth is %d; want 0 (none) or a 1-based call number", f.Nth)
	}
	if !(f.Prob >= 0 && f.Prob <= 1) {
		return fmt.Errorf("sim: Faults.Prob is %v; want a probability in [0, 1]", f.Prob)
	}
	return nil
}

// faultState decides which raw allocations fail. Guarded by Device.mu.
type faultState struct {
	f Faults
	// calls counts raw allocations since the Faults were set.
	calls int64
	rng   *rand.Rand
}

func newFaultState(f Faults) faultState {
	return faultState{f: f, rng: rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))}
}

// next counts one raw allocation and reports whether it fails, and its number.
func (s *faultState) next() (fail bool, call int64) {
	s.calls++
	switch {
	case s.f.Nth > 0 && s.calls == s.f.Nth:
		fail = true
	case s.f.Nth > 0 && s.f.Every && s.calls%s.f.Nth == 0:
		fail = true
	}
	// Draw on every call, so that a seed fails the same calls whatever Nth does.
	if s.f.Prob > 0 && s.rng.Float64() < s.f.Prob {
		fail = true
	}
	return fail, s.calls
}
