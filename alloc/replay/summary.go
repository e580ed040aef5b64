package replay

// Summary describes a trace without replaying it: what an allocator must at least hold.
// Its JSON keys are snake_case, as every JSON output of sublet's.
type Summary struct {
	Events      int `json:"events"`
	Allocs      int `json:"allocs"`
	Frees       int `json:"frees"`
	EmptyCaches int `json:"empty_caches"`
	// PeakLive is the most bytes requested and not yet freed at one time, counting
	// every alloc as successful.
	PeakLive int64 `json:"peak_live"`
	// PeakLiveEvent is the 0-based index of the event at which PeakLive is first reached.
	PeakLiveEvent int `json:"peak_live_event"`
	// MinSize and MaxSize bound the alloc sizes (0 when there are no allocs).
	MinSize int64 `json:"min_size"`
	MaxSize int64 `json:"max_size"`
	// TotalAllocated is the sum of all alloc sizes.
	TotalAllocated int64 `json:"total_allocated"`
}

// Summarize walks a valid trace (see Validate) once.
func Summarize(events []Event) Summary {
	s := Summary{Events: len(events)}
	size := make(map[int64]int64)
	var live int64
	for i, e := range events {
		switch e.Op {
		case OpAlloc:
			s.Allocs++
			if s.MinSize == 0 || e.Size < s.MinSize {
				s.MinSize = e.Size
			}
			s.MaxSize = max(s.MaxSize, e.Size)
			s.TotalAllocated += e.Size
			size[e.ID] = e.Size
			live += e.Size
			if live > s.PeakLive {
				s.PeakLive, s.PeakLiveEvent = live, i
			}
		case OpFree:
			s.Frees++
			live -= size[e.ID]
			delete(size, e.ID)
		case OpEmptyCache:
			s.EmptyCaches++
		}
	}
	return s
}
