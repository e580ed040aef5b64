package alloc

import (
	"fmt"
	"strings"

	"github.com/subletml/sublet/device"
)

// Summary returns the allocator's statistics as a table laid out exactly like
// torch.cuda.memory_summary(): the same rows, widths and number formatting, with a
// title naming sublet and the device. The rows PyTorch names after the GPU ("CUDA
// OOMs", "GPU reserved memory") name the device's kind on cpu and sim. abbreviated
// drops the per-pool rows.
func (a *Allocator) Summary(abbreviated bool) string {
	st := a.Stats()
	return formatSummary(&st, a.dev.Name(), a.dev.Kind(), abbreviated)
}

// summaryWords are the words of memory_summary's rows that name the device: what
// fails, what the retries retry, what holds the reserved memory.
type summaryWords struct{ ooms, retries, reserver string }

// wordsFor returns PyTorch's words for a GPU (and any kind without words of its own),
// and the kind's for cpu and sim.
func wordsFor(k device.Kind) summaryWords {
	switch k {
	case device.CPU:
		return summaryWords{"CPU OOMs", "mmap retries", "CPU"}
	case device.Sim:
		return summaryWords{"Sim OOMs", "sim Malloc retries", "Sim"}
	}
	return summaryWords{"CUDA OOMs", "cudaMalloc retries", "GPU"}
}

// scale steps v down by step per unit while pref, scaled along, is at least limit:
// memory_summary's unit choice, where pref is the row's "all" value.
func scale(v, pref, step int64, limit float64, units []string) (int64, string) {
	unit := units[0]
	p := float64(pref)
	for _, next := range units[1:] {
		if p < limit {
			break
		}
		unit = next
		v /= step
		p /= float64(step)
	}
	return v, unit
}

// formatSize is memory_summary's _format_size: units of 1024, stepping up while the
// row's value is at least 768 of the current unit.
func formatSize(v, pref int64) string {
	v, unit := scale(v, pref, 1024, 768*1024, []string{"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"})
	return fmt.Sprintf("%6d %s", v, unit)
}

// formatCount is memory_summary's _format_count: units of 1000 from 750,000 on.
func formatCount(v, pref int64) string {
	v, unit := scale(v, pref, 1000, 750*1000, []string{" ", "K", "M"})
	return fmt.Sprintf("%7d %s ", v, unit)
}

func formatSummary(st *Stats, dev string, kind device.Kind, abbreviated bool) string {
	w := wordsFor(kind)
	rule := func(c string) string { return strings.Repeat(c, 75) }
	lines := []string{
		rule("="),
		fmt.Sprintf(" %16s sublet memory summary, device %-26s ", "", dev),
		rule("-"),
		fmt.Sprintf("%21s: %-12d | %25s: %-8d  ", w.ooms, st.NumOOMs, w.retries, st.NumAllocRetries),
		rule("="),
		"        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
	}
	row := func(name string, s, pref Stat, f func(v, pref int64) string) string {
		return fmt.Sprintf(" %-21s | %s | %s | %s | %s ", name,
			f(s.Current, pref.Current), f(s.Peak, pref.Peak), f(s.Allocated, pref.Allocated), f(s.Freed, pref.Freed))
	}
	metrics := []struct {
		a    *StatArray
		name string
		f    func(v, pref int64) string
	}{
		{&st.AllocatedBytes, "Allocated memory", formatSize},
		{&st.ActiveBytes, "Active memory", formatSize},
		{&st.RequestedBytes, "Requested memory", formatSize},
		{&st.ReservedBytes, w.reserver + " reserved memory", formatSize},
		{&st.InactiveSplitBytes, "Non-releasable memory", formatSize},
		{&st.Allocation, "Allocations", formatCount},
		{&st.Active, "Active allocs", formatCount},
		{&st.Segment, w.reserver + " reserved segments", formatCount},
		{&st.InactiveSplit, "Non-releasable allocs", formatCount},
	}
	for _, m := range metrics {
		lines = append(lines, rule("-"), row(m.name, m.a[StatAll], m.a[StatAll], m.f))
		if !abbreviated {
			lines = append(lines,
				row("      from large pool", m.a[StatLargePool], m.a[StatAll], m.f),
				row("      from small pool", m.a[StatSmallPool], m.a[StatAll], m.f))
		}
	}
	for _, m := range []struct {
		s    Stat
		name string
	}{{st.OversizeAllocations, "Oversize allocations"}, {st.OversizeSegments, "Oversize " + w.reserver + " segments"}} {
		lines = append(lines, rule("-"), row(m.name, m.s, m.s, formatCount))
	}
	lines = append(lines, rule("="))
	return "|" + strings.Join(lines, "|\n|") + "|\n"
}
