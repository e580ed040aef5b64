package replay

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// seriesKeys are the statistics recorded after every event, in torch_replay.py's KEYS
// order, with where each lives in alloc.Stats. Reading the struct instead of building
// StatsMap's ~120-entry map per event keeps a 10k-event replay in milliseconds; a test
// checks every getter against StatsMap.
var seriesKeys = [...]struct {
	name string
	get  func(s *alloc.Stats) int64
}{
	{"allocated_bytes.all.current", func(s *alloc.Stats) int64 { return s.AllocatedBytes[alloc.StatAll].Current }},
	{"reserved_bytes.all.current", func(s *alloc.Stats) int64 { return s.ReservedBytes[alloc.StatAll].Current }},
	{"active_bytes.all.current", func(s *alloc.Stats) int64 { return s.ActiveBytes[alloc.StatAll].Current }},
	{"inactive_split_bytes.all.current", func(s *alloc.Stats) int64 { return s.InactiveSplitBytes[alloc.StatAll].Current }},
	{"segment.all.current", func(s *alloc.Stats) int64 { return s.Segment[alloc.StatAll].Current }},
	{"num_alloc_retries", func(s *alloc.Stats) int64 { return s.NumAllocRetries }},
	{"num_ooms", func(s *alloc.Stats) int64 { return s.NumOOMs }},
	{"num_device_alloc", func(s *alloc.Stats) int64 { return s.NumDeviceAlloc }},
	{"num_device_free", func(s *alloc.Stats) int64 { return s.NumDeviceFree }},
	{"requested_bytes.all.current", func(s *alloc.Stats) int64 { return s.RequestedBytes[alloc.StatAll].Current }},
}

// SeriesKeys returns the names of a Result's series columns, torch_replay.py's KEYS.
func SeriesKeys() []string {
	keys := make([]string, len(seriesKeys))
	for i, k := range seriesKeys {
		keys[i] = k.name
	}
	return keys
}

// Result is a replay's outcome, shaped like torch_replay.py's output.
type Result struct {
	// Keys names the columns of Series (SeriesKeys).
	Keys []string `json:"keys"`
	// Series has one row per event replayed, taken after the event; nil unless asked for.
	Series [][]int64 `json:"series,omitempty"`
	// Final is every statistic after the last event, under PyTorch's flat key names
	// (num_ooms counts the allocs that ended in OOM).
	Final map[string]int64 `json:"final"`
	// Live are the blocks of the trace's ids still allocated after the last event
	// replayed, for a caller that gives the device back (Free each, then EmptyCache).
	Live []device.Ptr `json:"-"`
	// OOMs counts the allocs of the replay that ended in out of memory; FirstOOM is the
	// first of them, its Err the *alloc.OOMError (nil when none did).
	OOMs     int         `json:"-"`
	FirstOOM *EventError `json:"-"`
}

// EventError is a replay stopped at one event by an error that is not an OOM.
type EventError struct {
	// Index is the 0-based event index; the event is line Index+1 of its trace.
	Index int
	Event Event
	Err   error
}

func (e *EventError) Error() string {
	ev := e.Event
	what := ev.Op.String()
	switch ev.Op {
	case OpAlloc:
		what += fmt.Sprintf(" id %d size %d", ev.ID, ev.Size)
		if ev.Stream != 0 {
			what += fmt.Sprintf(" stream %d", ev.Stream)
		}
	case OpFree:
		what += fmt.Sprintf(" id %d", ev.ID)
	}
	return fmt.Sprintf("replay line %d (%s): %v", e.Index+1, what, e.Err)
}

func (e *EventError) Unwrap() error { return e.Err }

// Replay runs events through a, as torch_replay.py runs them through PyTorch: an alloc
// that fails with *alloc.OOMError (counted by the allocator in num_ooms) leaves its id
// not live, so the trace's later free of it is skipped; any other error stops the
// replay with an *EventError, returning the rows recorded before it. Trace streams
// other than 0 become device streams created on first use. With series, a row of
// SeriesKeys is recorded after every event. Ids still live at the end stay allocated
// (Result.Live).
func Replay(a *alloc.Allocator, events []Event, series bool) (*Result, error) {
	return ReplayWith(a, events, Options{Series: series})
}

// Options are ReplayWith's.
type Options struct {
	// Series records a row of SeriesKeys after every event.
	Series bool
	// Progress, when not nil, is called with the number of events replayed so far,
	// every ProgressEvery events and after the last.
	Progress func(done int)
}

// ProgressEvery is how many events pass between two calls of Options.Progress.
const ProgressEvery = 4096

// ReplayWith is Replay with options.
func ReplayWith(a *alloc.Allocator, events []Event, o Options) (*Result, error) {
	series := o.Series
	if err := Validate(events); err != nil {
		return nil, err
	}
	res := &Result{Keys: SeriesKeys()}
	if series {
		res.Series = make([][]int64, 0, len(events))
	}
	r := replayer{a: a, ptrs: make(map[int64]device.Ptr), streams: map[int64]device.Stream{0: 0}}
	for i, e := range events {
		if err := r.apply(e); err != nil {
			r.finish(res)
			return res, &EventError{Index: i, Event: e, Err: err}
		}
		if r.oom != nil {
			res.OOMs++
			if res.FirstOOM == nil {
				res.FirstOOM = &EventError{Index: i, Event: e, Err: r.oom}
			}
			r.oom = nil
		}
		if series {
			st := a.Stats()
			row := make([]int64, len(seriesKeys))
			for j, k := range seriesKeys {
				row[j] = k.get(&st)
			}
			res.Series = append(res.Series, row)
		}
		if o.Progress != nil && ((i+1)%ProgressEvery == 0 || i == len(events)-1) {
			o.Progress(i + 1)
		}
	}
	r.finish(res)
	return res, nil
}

// finish records the final statistics and the blocks still live, lowest id first.
func (r *replayer) finish(res *Result) {
	res.Final = r.a.StatsMap()
	res.Live = (&Player{r: *r}).Live()
}

// replayer is the state of one Replay call.
type replayer struct {
	a *alloc.Allocator
	// ptrs maps each live trace id to its block; an id whose alloc hit OOM is absent.
	ptrs map[int64]device.Ptr
	// streams maps trace stream numbers to device streams.
	streams map[int64]device.Stream
	// oom is the error of the last alloc that ended in out of memory, until the caller
	// takes it.
	oom *alloc.OOMError
}

// Site is the tag of every allocation a replay makes: a trace records no allocation
// sites, so the memory history (snapshots, sublet viz and top) names them all by it
// instead of by the replaying program's own code.
var Site = alloc.Tag{Op: "replayed trace (it records no sites)"}

func (r *replayer) apply(e Event) error {
	switch e.Op {
	case OpAlloc:
		s, err := r.stream(e.Stream)
		if err != nil {
			return err
		}
		tag := Site
		tag.Lifetime = e.Lifetime
		p, err := r.a.AllocTagged(e.Size, s, tag)
		var oom *alloc.OOMError
		if errors.As(err, &oom) {
			r.oom = oom
			return nil
		}
		if err != nil {
			return err
		}
		r.ptrs[e.ID] = p
	case OpFree:
		p, ok := r.ptrs[e.ID]
		if !ok {
			return nil
		}
		delete(r.ptrs, e.ID)
		return r.a.Free(p)
	case OpEmptyCache:
		return r.a.EmptyCache()
	}
	return nil
}

// stream returns the device stream of trace stream n, creating it on first use.
func (r *replayer) stream(n int64) (device.Stream, error) {
	if s, ok := r.streams[n]; ok {
		return s, nil
	}
	s, err := r.a.Device().NewStream()
	if err != nil {
		return 0, fmt.Errorf("create device stream for trace stream %d: %w", n, err)
	}
	r.streams[n] = s
	return s, nil
}
