// Package memprof exports device memory as pprof profiles, by Go stack, so that
// `go tool pprof -top` and `-http` work on a device as on the Go heap:
//
//	a.RecordHistory(alloc.HistoryOptions{})      // stacks are recorded from here on
//	// ... the workload ...
//	memprof.Write(f, a)                          // then: go tool pprof -top FILE
//	http.Handle("/debug/sublet/memory", memprof.Handler(nil))
//
// A profile has Go's heap profile sample types: alloc_objects and alloc_space (every
// allocation since history started, block sizes), inuse_objects and inuse_space (the
// blocks allocated now); inuse_space is the default. Samples carry the allocation's op
// and scope tag as labels. Memory allocated while history was off has no stack and is
// not in the profile (the device's statistics still count it).
package memprof

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/pprof/profile"

	"github.com/subletml/sublet/alloc"
)

// Profile builds the memory profile of the allocators (one device each; samples are
// labelled with the device's name).
func Profile(as ...*alloc.Allocator) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"},
		},
		DefaultSampleType: "inuse_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
		TimeNanos:         time.Now().UnixNano(),
	}
	funcs := map[[2]string]*profile.Function{}
	locs := map[alloc.Frame]*profile.Location{}
	for _, a := range as {
		for _, st := range a.HistorySites() {
			s := &profile.Sample{
				Value: []int64{st.Allocs, st.AllocBytes, st.LiveBlocks, st.LiveBytes},
				Label: map[string][]string{"device": {a.Device().Name()}},
			}
			if st.Tag.Op != "" {
				s.Label["op"] = []string{st.Tag.Op}
			}
			if st.Tag.Scope != "" {
				s.Label["scope"] = []string{st.Tag.Scope}
			}
			for _, f := range st.Frames {
				loc, ok := locs[f]
				if !ok {
					key := [2]string{f.Name, f.Filename}
					fn, ok := funcs[key]
					if !ok {
						fn = &profile.Function{ID: uint64(len(funcs) + 1), Name: f.Name, SystemName: f.Name, Filename: f.Filename}
						funcs[key] = fn
						p.Function = append(p.Function, fn)
					}
					loc = &profile.Location{ID: uint64(len(locs) + 1), Line: []profile.Line{{Function: fn, Line: int64(f.Line)}}}
					locs[f] = loc
					p.Location = append(p.Location, loc)
				}
				s.Location = append(s.Location, loc)
			}
			p.Sample = append(p.Sample, s)
		}
	}
	return p
}

// Write writes the allocators' profile, gzip-compressed protobuf as pprof reads it.
func Write(w io.Writer, as ...*alloc.Allocator) error {
	return Profile(as...).Write(w)
}

// Handler serves the profile of the allocators list returns (nil: alloc.Registered, every
// device the program uses), in the style of net/http/pprof's heap handler. ?device=NAME
// keeps one device; ?debug=1 answers the profile as text.
func Handler(list func() []*alloc.Allocator) http.Handler {
	if list == nil {
		list = alloc.Registered
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		as := list()
		if name := r.FormValue("device"); name != "" {
			var keep []*alloc.Allocator
			for _, a := range as {
				if a.Device().Name() == name {
					keep = append(keep, a)
				}
			}
			if len(keep) == 0 {
				http.Error(w, fmt.Sprintf("memprof: no allocator for device %q", name), http.StatusNotFound)
				return
			}
			as = keep
		}
		p := Profile(as...)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.FormValue("debug") == "1" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, p.String())
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="sublet-memory.pb.gz"`)
		if err := p.Write(w); err != nil {
			http.Error(w, "memprof: "+err.Error(), http.StatusInternalServerError)
		}
	})
}
