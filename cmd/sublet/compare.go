package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/replay"
)

const compareSynopsis = `sublet compare [-conf STRING] [-fraction F] [-device NAME] [-capacity BYTES] [-segments FILE] [-json] TRACE (or -trace TRACE)

Replays the trace through each allocation policy, PyTorch's (policy:pytorch) and the
planned one (policy:planned), each on a new device with the other settings of -conf (or
SUBLET_ALLOC_CONF) alike, and prints for each: peak reserved and peak allocated memory
and their ratio, the device allocations and frees (segments, and pages mapped and
unmapped), the allocations that ran out of memory, the time per allocation (the replay's
wall time over its allocations, the device's cost included: on sim, the H200's measured
driver costs) and, for the planned policy, the plans started and ended and the
allocations their arenas served. -json prints one JSON object instead of the table.

Exit status: 0 (allocations that ran out of memory are reported, not an error); 1 on
error (an empty trace is one); 2 on bad usage.`

// comparePolicies are the policies compare replays, in its rows' order.
var comparePolicies = []alloc.Policy{alloc.PolicyPyTorch, alloc.PolicyPlanned}

// compareRow is one policy's outcome.
type compareRow struct {
	Policy        string  `json:"policy"`
	PeakReserved  int64   `json:"peak_reserved"`
	PeakAllocated int64   `json:"peak_allocated"`
	Ratio         float64 `json:"ratio"`
	DeviceAllocs  int64   `json:"device_allocs"`
	DeviceFrees   int64   `json:"device_frees"`
	OOMs          int     `json:"ooms"`
	NsPerAlloc    float64 `json:"ns_per_alloc"`
	Plans         int64   `json:"plans"`
	PlansEnded    int64   `json:"plans_ended"`
	Served        int64   `json:"served_by_plans"`
}

// compareOutput is what compare -json prints.
type compareOutput struct {
	runHeader
	Allocs   int          `json:"allocs"`
	Policies []compareRow `json:"policies"`
}

func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", compareSynopsis, stderr)
	f := addReplayFlags(fs)
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	if _, err := parseInput(fs, args, &f.trace, traceWhat, true); err != nil {
		return err
	}
	events, cfg, err := f.read(fs, stderr)
	if err != nil {
		return err
	}
	out := compareOutput{runHeader: f.header("", len(events))}
	for _, e := range events {
		if e.Op == replay.OpAlloc {
			out.Allocs++
		}
	}
	for _, p := range comparePolicies {
		cfg.Policy = p
		row, dev, err := f.comparePolicy(cfg, events, out.Allocs)
		if err != nil {
			return fmt.Errorf("%s, policy %s: %w", f.trace, p, err)
		}
		out.Device = dev
		out.Policies = append(out.Policies, row)
	}
	if *asJSON {
		return writeJSON(stdout, out)
	}
	return writeCompareTable(stdout, out)
}

// comparePolicy replays events through an allocator with cfg on a new device and gives
// the device back.
func (f *replayFlags) comparePolicy(cfg alloc.Config, events []replay.Event, allocs int) (row compareRow, dev string, err error) {
	a, release, err := f.allocator(cfg)
	if err != nil {
		return row, "", err
	}
	defer func() { err = joinErr(err, release()) }()
	start := time.Now()
	res, err := replay.Replay(a, events, false)
	elapsed := time.Since(start)
	if res != nil {
		defer func() { err = joinErr(err, giveBack(a, res.Live)) }()
	}
	if err != nil {
		return row, "", err
	}
	st, ps := a.Stats(), a.PlanStats()
	row = compareRow{
		Policy:        cfg.Policy.String(),
		PeakReserved:  st.ReservedBytes[alloc.StatAll].Peak,
		PeakAllocated: st.AllocatedBytes[alloc.StatAll].Peak,
		DeviceAllocs:  st.NumDeviceAlloc,
		DeviceFrees:   st.NumDeviceFree,
		OOMs:          res.OOMs,
		Plans:         ps.Plans,
		PlansEnded:    ps.Ended,
		Served:        ps.Served,
	}
	if row.PeakAllocated > 0 {
		row.Ratio = float64(row.PeakReserved) / float64(row.PeakAllocated)
	}
	if allocs > 0 {
		row.NsPerAlloc = float64(elapsed.Nanoseconds()) / float64(allocs)
	}
	return row, a.Device().Name(), nil
}

func writeCompareTable(w io.Writer, out compareOutput) error {
	conf := out.Conf
	if conf == "" {
		conf = "(none)"
	}
	fmt.Fprintf(w, "%s: %d events, %d allocations, on %s; other settings %s (%s)", out.Trace, out.Events, out.Allocs, out.Device, conf, out.ConfFrom)
	if out.Fraction != 0 {
		fmt.Fprintf(w, ", memory fraction %v", out.Fraction)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tpeak reserved (MiB)\tpeak allocated (MiB)\treserved/allocated\tdevice allocs\tdevice frees\tOOMs\tµs/alloc\tplans\tserved by plans\t")
	for _, r := range out.Policies {
		plans, served := "-", "-"
		if r.Policy == alloc.PolicyPlanned.String() {
			plans = fmt.Sprintf("%d (%d ended)", r.Plans, r.PlansEnded)
			served = fmt.Sprintf("%d (%.0f%%)", r.Served, 100*float64(r.Served)/float64(max(out.Allocs, 1)))
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.3f\t%d\t%d\t%d\t%.2f\t%s\t%s\t\n", r.Policy, mibOf(r.PeakReserved), mibOf(r.PeakAllocated),
			r.Ratio, r.DeviceAllocs, r.DeviceFrees, r.OOMs, r.NsPerAlloc/1000, plans, served)
	}
	return tw.Flush()
}

func mibOf(n int64) float64 { return float64(n) / (1 << 20) }
