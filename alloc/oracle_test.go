package alloc

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// oracleDir holds PyTorch 2.11's results for the trace matrix, recorded on an H200 by
// bench/torch/torch_replay.py: for each run, the stats after every event and the final
// memory_stats().
const oracleDir = "../testdata/oracle"

// oracleRun is one torch_replay.py result.
type oracleRun struct {
	Trace         string           `json:"trace"`
	Conf          string           `json:"conf"`
	Fraction      float64          `json:"fraction"`
	TotalCapacity int64            `json:"total_capacity"`
	FreeAtStart   int64            `json:"free_at_start"`
	Segments      []sim.Segment    `json:"segments"`
	Keys          []string         `json:"keys"`
	Series        [][]int64        `json:"series"`
	Final         map[string]int64 `json:"final"`
}

// traceEvent is one line of an allocator trace.
type traceEvent struct {
	Op   string `json:"op"`
	ID   int64  `json:"id"`
	Size int64  `json:"size"`
}

func readGzipJSON(t *testing.T, path string, each func(dec *json.Decoder) error) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	require.NoError(t, err)
	require.NoError(t, each(json.NewDecoder(zr)), path)
}

func loadOracle(t *testing.T, path string) (oracleRun, []traceEvent) {
	var run oracleRun
	readGzipJSON(t, path, func(dec *json.Decoder) error { return dec.Decode(&run) })
	var events []traceEvent
	trace := filepath.Join("../testdata/traces", strings.TrimSuffix(run.Trace, ".jsonl")+".jsonl.gz")
	readGzipJSON(t, trace, func(dec *json.Decoder) error {
		for dec.More() {
			var e traceEvent
			if err := dec.Decode(&e); err != nil {
				return err
			}
			events = append(events, e)
		}
		return nil
	})
	return run, events
}

// replayOracle replays run's trace through a fresh allocator on a simulated device like
// the H200 the oracle ran on, and returns the first row where the stats differ ("" when
// none) and the final stats.
func replayOracle(t *testing.T, run oracleRun, events []traceEvent) (string, map[string]int64) {
	cfg, err := ParseConfig(run.Conf)
	require.NoError(t, err)
	opts := sim.Options{Capacity: run.TotalCapacity, Cost: &sim.CostModel{}}
	if run.Fraction == 0 {
		// What the process could get: the device's memory less what the driver and
		// other processes held when the oracle ran. (With a fraction, the total
		// matters, and the fraction is always the tighter limit.)
		opts.Capacity = run.FreeAtStart
	}
	if !cfg.ExpandableSegments {
		// The driver's own addresses, so that best fit breaks ties as it did there.
		opts.Segments = run.Segments
	}
	d, err := sim.New(opts)
	require.NoError(t, err)
	a, err := New(d, cfg)
	require.NoError(t, err)
	if run.Fraction > 0 {
		require.NoError(t, a.SetMemoryFraction(run.Fraction))
	}
	ptrs := map[int64]device.Ptr{}
	for i, e := range events {
		switch e.Op {
		case "alloc":
			p, err := a.Alloc(e.Size, 0)
			if err != nil {
				var oom *OOMError
				require.True(t, errors.As(err, &oom), "event %d: %v", i, err)
				break
			}
			ptrs[e.ID] = p
		case "free":
			if p, ok := ptrs[e.ID]; ok {
				require.NoError(t, a.Free(p))
				delete(ptrs, e.ID)
			}
		case "empty_cache":
			require.NoError(t, a.EmptyCache())
		default:
			t.Fatalf("event %d: unknown op %q", i, e.Op)
		}
		st := a.Stats()
		for k, key := range run.Keys {
			got, ok := st.Get(key)
			require.True(t, ok, key)
			if want := run.Series[i][k]; got != want {
				return fmt.Sprintf("event %d (%+v): %s = %d, PyTorch %d", i, e, key, got, want), st.Map()
			}
		}
	}
	return "", a.StatsMap()
}

// A few small oracle runs replay here with the same statistics after every event as
// PyTorch, and the same final memory_stats() (key set and values): the default config,
// expandable segments, and the device's real limit (release-and-retry, OOM). The
// replay package's golden test replays the whole matrix.
func TestOracleSeries(t *testing.T) {
	for _, name := range []string{"blog", "blog-es", "over_capacity", "oversize-mss64"} {
		path := filepath.Join(oracleDir, name+".json.gz")
		if _, err := os.Stat(path); err != nil {
			t.Skipf("no oracle results: %v", err)
		}
		t.Run(name, func(t *testing.T) {
			run, events := loadOracle(t, path)
			require.Len(t, run.Series, len(events))
			diff, final := replayOracle(t, run, events)
			require.Empty(t, diff)
			keys := func(m map[string]int64) []string {
				ks := make([]string, 0, len(m))
				for k := range m {
					ks = append(ks, k)
				}
				slices.Sort(ks)
				return ks
			}
			require.Equal(t, keys(run.Final), keys(final), "the memory_stats() key set")
			for k, want := range run.Final {
				assert.Equal(t, want, final[k], k)
			}
		})
	}
}
