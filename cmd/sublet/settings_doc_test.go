package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
}

// docFraction is the memory fraction of the second table: 1145 MiB of the H200, below
// the default setting's peak on the trace.
const docFraction = 0.008

// replayFinal runs sublet replay and returns its final statistics.
func replayFinal(t *testing.T, trace, conf string, fraction float64) map[string]int64 {
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

	fmt.Fprintln(&b, "| setting | recommended by | peak reserved (MiB) | vs default | peak allocated (MiB) | peak reserved − peak allocated (MiB) | device allocations | OOMs |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|")
	finals := make([]map[string]int64, len(seedSettings))
	for i, s := range seedSettings {
		f := replayFinal(t, trace, s.conf, 0)
		finals[i] = f
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %d |\n", code(s.conf), s.source, mib(peak(f)), pct(peak(f), peak(finals[0])),
			mib(f["allocated_bytes.all.peak"]), mib(peak(f)-f["allocated_bytes.all.peak"]), f["num_device_alloc"], f["num_ooms"])
	}
	def, split64, split512, combo, gcAlone, expandable := finals[0], finals[1], finals[2], finals[3], finals[4], finals[5]
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
		f := replayFinal(t, trace, s.conf, docFraction)
		capped[s.conf] = f
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d |\n", code(s.conf), mib(peak(f)), f["num_ooms"], f["num_alloc_retries"], f["num_device_alloc"], f["num_device_free"])
	}
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
	traces := []string{trace}
	for _, s := range seeds[1:] {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("seqlen%d.jsonl.gz", s))
		code, _, errs := sublet("trace", "gen", "-kind", "seqlen", "-seed", fmt.Sprint(s), "-o", path)
		require.Equal(t, 0, code, errs)
		traces = append(traces, path)
	}
	base := make([]int64, len(traces))
	for i, s := range seedSettings {
		fmt.Fprintf(&b, "| %s |", code(s.conf))
		for j, tr := range traces {
			p := peak(replayFinal(t, tr, s.conf, 0))
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
			default:
				assert.Greater(t, p, base[j], "%s on seed %d", s.conf, seeds[j])
			}
		}
		fmt.Fprintln(&b)
	}
	checkGenerated(t, "../../docs/alloc-settings.md", b.String())
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
