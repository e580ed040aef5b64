package profiler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/subletml/sublet/alloc/memviz"
)

// OpStats are the totals of one op name (and site, when grouped by site): PyTorch's
// FunctionEventAvg.
type OpStats struct {
	Op, Site            string
	Calls               int
	TotalTime, SelfTime time.Duration
	// Allocated and SelfAllocated are the block bytes allocated during the calls,
	// nested ops included or not; Freed the bytes freed while the op was innermost.
	Allocated, SelfAllocated, Freed int64
	// Peak is the highest peak contribution of one call.
	Peak int64
	// DeviceTime and SelfDeviceTime are the calls' device time, nested ops included or
	// not, and Kernels and SelfKernels the kernels they launched (Options.DeviceTime; 0
	// on devices that do not time events).
	DeviceTime, SelfDeviceTime time.Duration
	Kernels, SelfKernels       int64
}

// KeyAverages aggregates the ended ops by name, and by site too when bySite.
func (p *Profiler) KeyAverages(bySite bool) []OpStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	index := map[[2]string]int{}
	var out []OpStats
	for _, s := range p.done {
		key := [2]string{s.op, ""}
		if bySite {
			key[1] = s.site
		}
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, OpStats{Op: key[0], Site: key[1]})
		}
		o := &out[i]
		o.Calls++
		o.TotalTime += s.end - s.start
		o.SelfTime += s.end - s.start - s.childTime
		o.Allocated += s.totalAlloc
		o.SelfAllocated += s.selfAlloc
		o.Freed += s.freed
		o.Peak = max(o.Peak, s.peakAbove)
		o.DeviceTime += s.devTime
		o.SelfDeviceTime += s.devTime - s.childDevTime
		o.Kernels += s.launches
		o.SelfKernels += s.launches - s.childLaunches
	}
	return out
}

// Sort keys of Table (PyTorch's sort_by names where they exist).
const (
	SortSelfTime  = "self_cpu_time_total"
	SortTotalTime = "cpu_time_total"
	SortCalls     = "count"
	SortSelfMem   = "self_cpu_memory_usage"
	SortMem       = "cpu_memory_usage"
	SortPeak      = "peak_memory"
	// With Options.DeviceTime: device time, and kernels launched.
	SortSelfDeviceTime  = "self_cuda_time_total"
	SortTotalDeviceTime = "cuda_time_total"
	SortKernels         = "kernels"
)

// Table writes key_averages().table(sort_by=sortBy, row_limit=limit) (limit 0: every
// row): one row per op (per op and site with bySite), largest first.
func (p *Profiler) Table(w io.Writer, sortBy string, limit int, bySite bool) error {
	rows := p.KeyAverages(bySite)
	key := map[string]func(o OpStats) int64{
		SortSelfTime: func(o OpStats) int64 { return int64(o.SelfTime) }, SortTotalTime: func(o OpStats) int64 { return int64(o.TotalTime) },
		SortCalls: func(o OpStats) int64 { return int64(o.Calls) }, SortSelfMem: func(o OpStats) int64 { return o.SelfAllocated - o.Freed },
		SortMem: func(o OpStats) int64 { return o.Allocated }, SortPeak: func(o OpStats) int64 { return o.Peak },
		SortSelfDeviceTime: func(o OpStats) int64 { return int64(o.SelfDeviceTime) }, SortTotalDeviceTime: func(o OpStats) int64 { return int64(o.DeviceTime) },
		SortKernels: func(o OpStats) int64 { return o.SelfKernels },
	}[sortBy]
	if key == nil {
		return fmt.Errorf("profiler: Table: unknown sort key %q (want %s, %s, %s, %s, %s, %s, %s, %s or %s)", sortBy,
			SortSelfTime, SortTotalTime, SortCalls, SortSelfMem, SortMem, SortPeak, SortSelfDeviceTime, SortTotalDeviceTime, SortKernels)
	}
	slices.SortStableFunc(rows, func(a, b OpStats) int { return cmp.Or(cmp.Compare(key(b), key(a)), cmp.Compare(a.Op, b.Op)) })
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	var selfTotal, all, selfDevTotal time.Duration
	var kernels int64
	for _, o := range p.KeyAverages(false) {
		selfTotal += o.SelfTime
		selfDevTotal += o.SelfDeviceTime
		kernels += o.SelfKernels
	}
	all = selfTotal
	timed := selfDevTotal > 0 || kernels > 0 // device columns, as PyTorch's table has them with CUDA activities
	cols := []string{"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "CPU Mem", "Self CPU Mem", "Peak Mem", "# of Calls"}
	if timed {
		cols = append(cols, "Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg", "# kernels")
	}
	nameW := 24
	for _, o := range rows {
		nameW = max(nameW, len(label(o, bySite)))
	}
	var b strings.Builder
	sep := strings.Repeat("-", nameW) + "  " + strings.Repeat(strings.Repeat("-", 12)+"  ", len(cols)-1) + "\n"
	b.WriteString(sep)
	fmt.Fprintf(&b, "%*s  ", nameW, cols[0])
	for _, c := range cols[1:] {
		fmt.Fprintf(&b, "%12s  ", c)
	}
	b.WriteString("\n" + sep)
	pct := func(d, all time.Duration) string {
		if all == 0 {
			return "0.00%"
		}
		return fmt.Sprintf("%.2f%%", 100*float64(d)/float64(all))
	}
	for _, o := range rows {
		fmt.Fprintf(&b, "%*s  %12s  %12s  %12s  %12s  %12s  %12s  %12s  %12s  %12d  ", nameW, label(o, bySite),
			pct(o.SelfTime, all), dur(o.SelfTime), pct(o.TotalTime, all), dur(o.TotalTime), dur(o.TotalTime/time.Duration(o.Calls)),
			memviz.FormatBytes(o.Allocated), memviz.FormatBytes(o.SelfAllocated-o.Freed), memviz.FormatBytes(o.Peak), o.Calls)
		if timed {
			fmt.Fprintf(&b, "%12s  %12s  %12s  %12s  %12d  ", dur(o.SelfDeviceTime), pct(o.SelfDeviceTime, selfDevTotal),
				dur(o.DeviceTime), dur(o.DeviceTime/time.Duration(o.Calls)), o.SelfKernels)
		}
		b.WriteString("\n")
	}
	b.WriteString(sep)
	fmt.Fprintf(&b, "Self CPU time total: %s\n", dur(selfTotal))
	if timed {
		fmt.Fprintf(&b, "Self CUDA time total: %s\nKernels: %d\n", dur(selfDevTotal), kernels)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func label(o OpStats, bySite bool) string {
	if bySite && o.Site != "" {
		return o.Op + " @ " + o.Site
	}
	return o.Op
}

// dur formats d as PyTorch's table does: us below 1 ms, ms below 1 s, else s.
func dur(d time.Duration) string {
	switch us := float64(d) / 1e3; {
	case us < 1e3:
		return fmt.Sprintf("%.3fus", us)
	case us < 1e6:
		return fmt.Sprintf("%.3fms", us/1e3)
	default:
		return fmt.Sprintf("%.3fs", us/1e6)
	}
}

// traceEvent is one entry of the Chrome trace event format.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteChromeTrace writes the ended ops as complete events ("X", microseconds) and the
// allocated and reserved bytes as a counter track ("C", one sample per allocator
// event), in the JSON that chrome://tracing and ui.perfetto.dev open.
func (p *Profiler) WriteChromeTrace(w io.Writer) error {
	p.mu.Lock()
	var evs []traceEvent
	for _, s := range p.done {
		d := float64(s.end-s.start) / 1e3
		args := map[string]any{"allocated": s.totalAlloc, "self_allocated": s.selfAlloc, "freed": s.freed, "peak": s.peakAbove}
		if s.site != "" {
			args["site"] = s.site
		}
		if s.device != "" {
			args["device"] = s.device
		}
		evs = append(evs, traceEvent{Name: s.op, Cat: "op", Ph: "X", Ts: float64(s.start) / 1e3, Dur: &d, Pid: 1, Tid: 1, Args: args})
		if s.devTime > 0 { // the device's track: the op's work on its stream, on the host's clock
			dd := float64(s.devTime) / 1e3
			evs = append(evs, traceEvent{Name: s.op, Cat: "device", Ph: "X", Ts: float64(s.devStart) / 1e3, Dur: &dd, Pid: 2, Tid: 1 + s.depth,
				Args: map[string]any{"device": s.device, "kernels": s.launches, "self_kernels": s.launches - s.childLaunches}})
		}
	}
	for _, c := range p.counters {
		evs = append(evs, traceEvent{Name: "device memory", Ph: "C", Ts: float64(c.at) / 1e3, Pid: 1, Tid: 1,
			Args: map[string]any{"allocated": c.allocated, "reserved": c.reserved}})
	}
	p.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b traceEvent) int { return cmp.Compare(a.Ts, b.Ts) })
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"traceEvents": evs, "displayTimeUnit": "ms"})
}
