package replay_test

import (
	"fmt"

	"github.com/subletml/sublet/alloc/replay"
)

// A trace is a list of alloc/free events (JSONL on disk: ReadFile, WriteFile, or
// `sublet trace gen`). Replaying one under two configurations answers "what if": here
// the PyTorch blog's pattern, eight 16 MiB blocks freed and then four 32 MiB ones,
// with fixed segments and with expandable segments.
func Example() {
	const mib = 1 << 20
	var events []replay.Event
	for id := range int64(8) {
		events = append(events, replay.Event{Op: replay.OpAlloc, ID: id, Size: 16 * mib})
	}
	for id := range int64(8) {
		events = append(events, replay.Event{Op: replay.OpFree, ID: id})
	}
	for id := range int64(4) {
		events = append(events, replay.Event{Op: replay.OpAlloc, ID: 8 + id, Size: 32 * mib})
	}
	fmt.Println(replay.Summarize(events).PeakLive/mib, "MiB live at most")
	for _, conf := range []string{"", "expandable_segments:True"} {
		final, err := replay.OnSim(events, conf, 0, 0) // a fresh simulated H200 each time
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-26q peak reserved %d MiB in %d device allocations\n", conf,
			final["reserved_bytes.all.peak"]/mib, final["num_device_alloc"])
	}
	// Output:
	// 128 MiB live at most
	// ""                         peak reserved 256 MiB in 12 device allocations
	// "expandable_segments:True" peak reserved 140 MiB in 7 device allocations
}
