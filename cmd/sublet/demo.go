package main

import (
	"fmt"
	"io"

	"github.com/subletml/sublet/alloc/replay"
)

// demoRuns are the demo's (trace kind, conf, fraction) rows, each showing one knob.
var demoRuns = []struct {
	kind, conf string
	fraction   float64
}{
	{"seqlen", "", 0},
	{"seqlen", "roundup_power2_divisions:4", 0},
	{"seqlen", "expandable_segments:True", 0},
	{"oversize", "", 0},
	{"oversize", "max_split_size_mb:64", 0},
	{"oom_fraction", "", 0.0143},
	{"oom_fraction", "garbage_collection_threshold:0.6", 0.0143},
}

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "sublet demo", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "sublet's caching allocator on generated traces, on a simulated H200 (no GPU needed).")
	fmt.Fprintln(stdout, "\nThe PyTorch blog's fragmentation pattern: blocks of one segment merge, of two never.")
	for _, c := range []struct {
		what          string
		first, second [2]int64
	}{
		{"8 x 16 MiB, freed, then 4 x 32 MiB", [2]int64{8, 16}, [2]int64{4, 32}},
		{"4 x 32 MiB, freed, then 8 x 16 MiB", [2]int64{4, 32}, [2]int64{8, 16}},
	} {
		var events []replay.Event
		for w, wave := range [][2]int64{c.first, c.second} {
			for i := range wave[0] {
				events = append(events, replay.Event{Op: replay.OpAlloc, ID: int64(w*100) + i, Size: wave[1] << 20})
			}
			for i := range wave[0] {
				events = append(events, replay.Event{Op: replay.OpFree, ID: int64(w*100) + i})
			}
		}
		var reserved [2]int64
		for i, conf := range []string{"", "expandable_segments:True"} {
			final, err := replay.OnSim(events, conf, 0, 0)
			if err != nil {
				return err
			}
			reserved[i] = final["reserved_bytes.all.peak"] >> 20
		}
		fmt.Fprintf(stdout, "  %-36s reserved %4d MiB (default), %4d MiB (expandable segments)\n", c.what, reserved[0], reserved[1])
	}

	fmt.Fprintf(stdout, "\n%-13s %-34s %8s %14s %14s %6s %9s %5s %8s\n", "trace", "config", "fraction", "peak alloc MiB", "peak reserved", "ratio", "raw alloc", "OOMs", "retries")
	for _, r := range demoRuns {
		events, err := replay.Generate(r.kind, 1)
		if err != nil {
			return err
		}
		final, err := replay.OnSim(events, r.conf, r.fraction, 0)
		if err != nil {
			return err
		}
		conf := r.conf
		if conf == "" {
			conf = "default"
		}
		pa, pr := final["allocated_bytes.all.peak"], final["reserved_bytes.all.peak"]
		fmt.Fprintf(stdout, "%-13s %-34s %8g %14.1f %14.1f %6.3f %9d %5d %8d\n", r.kind, conf, r.fraction,
			float64(pa)/(1<<20), float64(pr)/(1<<20), float64(pr)/float64(max(pa, 1)),
			final["num_device_alloc"], final["num_ooms"], final["num_alloc_retries"])
	}
	fmt.Fprintln(stdout, "\nReplay any trace: sublet replay -trace testdata/traces/seqlen.jsonl.gz [-conf ...] [-series]")
	return nil
}
