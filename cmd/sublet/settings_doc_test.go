package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device/sim"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated part of docs/alloc-settings.md")

// seedSetting is an allocator setting the seed tutorials recommend.
type seedSetting struct {
	conf, source string
}

// seedSettings are the rows of docs/alloc-settings.md, the default first.
var seedSettings = []seedSetting{
	{"", "the default"},
	{"max_split_size_mb:64", "the empty_cache tutorial, for variable-length inputs"},
	{"max_split_size_mb:512,roundup_power2_divisions:16", "the torch.cuda mechanism tutorial, against fragmentation"},
	{"max_split_size_mb:128,roundup_power2_divisions:4,garbage_collection_threshold:0.8", "the empty_cache tutorial's \"combined tuning\""},
	{"garbage_collection_threshold:0.8", "that combination's GC threshold alone, without a memory fraction"},
	{"expandable_segments:True", "the torch.cuda mechanism tutorial (\"PyTorch 2.0+: True\")"},
	{"policy:planned", "none: sublet's planned policy, beside them (docs/allocator.md)"},
}

// docFraction is the memory fraction of the second table: 1145 MiB of the H200, below
// the default setting's peak on the trace.
const docFraction = 0.008

// replayFinal runs sublet replay and returns its final statistics.
func replayCLI(t *testing.T, trace, conf string, fraction float64) map[string]int64 {
	t.Helper()
	args := []string{"replay", "-trace", trace, "-conf", conf}
	if fraction > 0 {
		args = append(args, "-fraction", fmt.Sprint(fraction), "-allow-oom")
	}
	code, out, errs := sublet(args...)
	require.Equal(t, 0, code, errs)
	var r replayOutput
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	return r.Final
}

// replayFinal replays events as sublet replay does (alloc/replay.OnSim: the simulated
// H200, the settings, the fraction) and returns the final statistics; parsing the trace
// once instead of once a row keeps the test fast.
func replayFinal(t *testing.T, events []replay.Event, conf string, fraction float64) map[string]int64 {
	t.Helper()
	f, err := replay.OnSim(events, conf, fraction, 0)
	require.NoError(t, err, conf)
	return f
}

func mib(n int64) string { return fmt.Sprintf("%d", n>>20) }

func pct(n, base int64) string {
	if n == base {
		return "="
	}
	return fmt.Sprintf("%+.0f%%", 100*(float64(n)/float64(base)-1))
}

func code(conf string) string {
	if conf == "" {
		return "(none)"
	}
	return "`" + conf + "`"
}

// The tables of docs/alloc-settings.md are what sublet replay says today, and the
// document's conclusions hold on every trace of the table; `go test ./cmd/sublet -run
// TestAllocSettingsDoc -update` rewrites the tables.
func TestAllocSettingsDoc(t *testing.T) {
	const trace = "../../testdata/traces/seqlen.jsonl.gz"
	var b strings.Builder
	peak := func(f map[string]int64) int64 { return f["reserved_bytes.all.peak"] }
	events, err := replay.ReadFile(trace)
	require.NoError(t, err)

	fmt.Fprintln(&b, "| setting | recommended by | peak reserved (MiB) | vs default | peak allocated (MiB) | peak reserved − peak allocated (MiB) | device allocations | OOMs |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|")
	finals := make([]map[string]int64, len(seedSettings))
	for i, s := range seedSettings {
		f := replayCLI(t, trace, s.conf, 0) // this table is what the command prints
		assert.Equal(t, f, replayFinal(t, events, s.conf, 0), "%s: the command's replay is OnSim's", s.conf)
		finals[i] = f
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %d |\n", code(s.conf), s.source, mib(peak(f)), pct(peak(f), peak(finals[0])),
			mib(f["allocated_bytes.all.peak"]), mib(peak(f)-f["allocated_bytes.all.peak"]), f["num_device_alloc"], f["num_ooms"])
	}
	def, split64, split512, combo, gcAlone, expandable, planned := finals[0], finals[1], finals[2], finals[3], finals[4], finals[5], finals[6]
	assert.Equal(t, def, gcAlone, "the GC threshold without a fraction changes nothing, not one statistic")
	assert.Less(t, peak(expandable), peak(def), "expandable segments reserve less")
	assert.Greater(t, peak(split64), 2*peak(def), "max_split_size_mb:64 reserves more than twice as much")
	assert.Greater(t, peak(combo), peak(def))
	assert.InEpsilon(t, peak(def), peak(split512), 0.02, "512 + roundup 16: within 2% of the default")

	fraction := docFraction
	allowed := int64(fraction * float64(sim.DefaultCapacity))
	fmt.Fprintf(&b, "\nWith a memory fraction of %g (%d MiB of the H200's %d MiB allowed, less than the default's peak; `-fraction %g`), which arms the GC threshold:\n\n",
		docFraction, allowed>>20, sim.DefaultCapacity>>20, docFraction)
	fmt.Fprintln(&b, "| setting | peak reserved (MiB) | OOMs | release-and-retries | device allocations | device frees |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	capped := map[string]map[string]int64{}
	for _, s := range seedSettings {
		f := replayFinal(t, events, s.conf, docFraction)
		capped[s.conf] = f
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d |\n", code(s.conf), mib(peak(f)), f["num_ooms"], f["num_alloc_retries"], f["num_device_alloc"], f["num_device_free"])
	}
	assert.Equal(t, capped[""], replayCLI(t, trace, "", docFraction), "the command's replay under a fraction is OnSim's")
	assert.Positive(t, capped[""]["num_ooms"], "the default runs out of memory under the fraction")
	gc := capped["garbage_collection_threshold:0.8"]
	assert.Zero(t, gc["num_ooms"], "armed by the fraction, the GC threshold avoids those OOMs")
	assert.Zero(t, gc["num_alloc_retries"], "and never needs to release everything")
	assert.Zero(t, capped["expandable_segments:True"]["num_ooms"])
	assert.Greater(t, capped["max_split_size_mb:64"]["num_device_alloc"], 2*capped[""]["num_device_alloc"], "max_split_size_mb:64 gets by on release-and-retry")

	fmt.Fprintln(&b, "\nPeak reserved (MiB) on the trace of each seed (`sublet trace gen -kind seqlen -seed N`; seed 1 is the committed trace):")
	fmt.Fprintln(&b)
	fmt.Fprint(&b, "| setting |")
	seeds := []int{1, 2, 3, 4, 5}
	for _, s := range seeds {
		fmt.Fprintf(&b, " seed %d |", s)
	}
	fmt.Fprint(&b, "\n|---|")
	for range seeds {
		fmt.Fprint(&b, "---|")
	}
	fmt.Fprintln(&b)
	traces := [][]replay.Event{events}
	for _, s := range seeds[1:] {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("seqlen%d.jsonl.gz", s))
		code, _, errs := sublet("trace", "gen", "-kind", "seqlen", "-seed", fmt.Sprint(s), "-o", path)
		require.Equal(t, 0, code, errs)
		ev, err := replay.ReadFile(path)
		require.NoError(t, err)
		traces = append(traces, ev)
	}
	base := make([]int64, len(traces))
	bySeed := map[string][]int64{} // each setting's peak reserved on each seed's trace
	for i, s := range seedSettings {
		fmt.Fprintf(&b, "| %s |", code(s.conf))
		for j, tr := range traces {
			p := peak(finals[i])
			if j > 0 {
				p = peak(replayFinal(t, tr, s.conf, 0))
			}
			bySeed[s.conf] = append(bySeed[s.conf], p)
			if i == 0 {
				base[j] = p
				fmt.Fprintf(&b, " %s |", mib(p))
				continue
			}
			fmt.Fprintf(&b, " %s (%s) |", mib(p), pct(p, base[j]))
			switch s.conf {
			case "expandable_segments:True", "max_split_size_mb:512,roundup_power2_divisions:16":
				assert.LessOrEqual(t, float64(p), 1.02*float64(base[j]), "%s on seed %d", s.conf, seeds[j])
			case "garbage_collection_threshold:0.8":
				assert.Equal(t, base[j], p, "seed %d", seeds[j])
			case "policy:planned":
				assert.LessOrEqual(t, p, bySeed["expandable_segments:True"][j], "the planned policy reserves no more than expandable segments, seed %d", seeds[j])
			default:
				assert.Greater(t, p, base[j], "%s on seed %d", s.conf, seeds[j])
			}
		}
		fmt.Fprintln(&b)
	}
	checkGenerated(t, "../../docs/alloc-settings.md", b.String())

	// The figures the prose quotes are today's too.
	less := func(p, base int64) float64 { return 100 * (1 - float64(p)/float64(base)) }
	var expLess, split64More, plannedLess []float64
	for j := 1; j < len(seeds); j++ {
		if l := less(bySeed["expandable_segments:True"][j], base[j]); l >= 0.5 {
			expLess = append(expLess, l)
		} else {
			assert.Equal(t, "+0%", pct(bySeed["expandable_segments:True"][j], base[j]), "seed %d: as much as the default", seeds[j])
			assert.Equal(t, 3, seeds[j], "the seed the prose names")
		}
		split64More = append(split64More, -less(bySeed["max_split_size_mb:64"][j], base[j]))
		plannedLess = append(plannedLess, less(bySeed["policy:planned"][j], base[j]))
		assert.InDelta(t, 0, less(bySeed["max_split_size_mb:512,roundup_power2_divisions:16"][j], base[j]), 1.5, "within 1%% on seed %d", seeds[j])
	}
	gap := func(f map[string]int64) string { return mib(peak(f) - f["allocated_bytes.all.peak"]) }
	cExp, cDef, c64, c512 := capped["expandable_segments:True"], capped[""], capped["max_split_size_mb:64"], capped["max_split_size_mb:512,roundup_power2_divisions:16"]
	assert.Zero(t, cExp["num_alloc_retries"]+cExp["num_device_free"], "under a fraction expandable segments never retry nor free")
	assert.Equal(t, c512["num_ooms"], cDef["num_ooms"]+1)
	assert.Equal(t, peak(gc), peak(cExp), "the GC threshold under the fraction peaks where expandable segments do")
	checkProse(t, "../../docs/alloc-settings.md",
		fmt.Sprintf("%d events (allocations and frees), %s MiB live at the most", len(events), mib(def["requested_bytes.all.peak"])),
		fmt.Sprintf("It reserves %.0f%% less than the default on the trace (%.0f–%.0f%% less on the other seeds, as much as the default on seed 3", less(peak(expandable), peak(def)), slices.Min(expLess), slices.Max(expLess)),
		fmt.Sprintf("its peak reserved exceeds its peak allocated by %s MiB (the default's by %s MiB)", gap(expandable), gap(def)),
		fmt.Sprintf("it calls the driver less (%d allocations against %d)", expandable["num_device_alloc"], def["num_device_alloc"]),
		fmt.Sprintf("%.1f× the default's peak (%s), %.0f–%.0f%% more on the other seeds", float64(peak(split64))/float64(peak(def)), pct(peak(split64), peak(def)), slices.Min(split64More), slices.Max(split64More)),
		fmt.Sprintf("release-and-retry: %s it empties its cache, and it calls cuMemAlloc %d times against the default's %d", times(c64["num_alloc_retries"]), c64["num_device_alloc"], cDef["num_device_alloc"]),
		fmt.Sprintf("Under the fraction it runs out of memory %s, once more than the default", times(c512["num_ooms"])),
		fmt.Sprintf("the default runs out of memory %s after %s release-and-retries", times(cDef["num_ooms"]), numberWords[cDef["num_alloc_retries"]]),
		fmt.Sprintf("is thus %.0f%% worse than the default without a fraction", -less(peak(combo), peak(def))),
		fmt.Sprintf("%.0f%% less than the default on the trace (%.0f–%.0f%% less on the other seeds, where expandable segments save up to %.0f%%), its peak reserved %s MiB above its peak allocated",
			less(peak(planned), peak(def)), slices.Min(plannedLess), slices.Max(plannedLess), slices.Max(expLess), gap(planned)),
		fmt.Sprintf("(%d device allocations and %d frees against expandable segments' %d and %d)", planned["num_device_alloc"], planned["num_device_free"], expandable["num_device_alloc"], expandable["num_device_free"]),
	)
	cPlanned := capped["policy:planned"]
	assert.Zero(t, cPlanned["num_ooms"]+cPlanned["num_alloc_retries"], "under the fraction the planned policy neither runs out of memory nor retries")
}

// numberWords are the numbers the prose spells out.
var numberWords = []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}

// times is n times in words: "once", "twice", "three times".
func times(n int64) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return numberWords[n] + " times"
}

// checkProse checks that the document at path says each phrase, its lines joined.
func checkProse(t *testing.T, path string, phrases ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(data)), " ")
	for _, p := range phrases {
		assert.Contains(t, doc, p, "%s says a figure that is not today's", path)
	}
}

// The generated part of a document lies between these lines.
const (
	beginGenerated = "<!-- generated by TestAllocSettingsDoc (cmd/sublet): do not edit by hand -->\n"
	endGenerated   = "<!-- end of the generated part -->\n"
)

// checkGenerated compares the generated part of the document at path with want, or
// writes want there with -update.
func checkGenerated(t *testing.T, path, want string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(data)
	i, j := strings.Index(doc, beginGenerated), strings.Index(doc, endGenerated)
	require.True(t, i >= 0 && j > i, "%s has no generated part between %q and %q", path, beginGenerated, endGenerated)
	got := doc[i+len(beginGenerated) : j]
	if *updateDocs {
		require.NoError(t, os.WriteFile(path, []byte(doc[:i+len(beginGenerated)]+want+doc[j:]), 0o644))
		return
	}
	assert.Equal(t, want, got, "%s is out of date: run go test ./cmd/sublet -run TestAllocSettingsDoc -update", path)
}
