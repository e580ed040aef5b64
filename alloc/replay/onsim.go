package replay

import (
	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/sim"
)

// OnSim replays events through a new allocator with configuration conf (and memory
// fraction, 0 for none) on a fresh simulated device of capacity bytes (0: an H200), and
// returns the final statistics: the quick "what if" of a trace under other settings.
func OnSim(events []Event, conf string, fraction float64, capacity int64) (map[string]int64, error) {
	d, err := sim.New(sim.Options{Capacity: capacity})
	if err != nil {
		return nil, err
	}
	cfg, err := alloc.ParseConfig(conf)
	if err != nil {
		return nil, err
	}
	a, err := alloc.New(d, cfg)
	if err != nil {
		return nil, err
	}
	if fraction != 0 {
		if err := a.SetMemoryFraction(fraction); err != nil {
			return nil, err
		}
	}
	res, err := Replay(a, events, false)
	if err != nil {
		return nil, err
	}
	return res.Final, nil
}
