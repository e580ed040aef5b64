package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/replay"
)

func TestWhatIf(t *testing.T) {
	var out bytes.Buffer
	trace := filepath.Join(t.TempDir(), "run.jsonl.gz")
	require.NoError(t, run([]string{"-o", trace}, &out))
	want := `workload: 10 requests of 48 steps on a 2.00 GiB device with the default settings
  out of memory in request 9 step 34: 81.00 MiB wanted, 1.96 GiB reserved of which 1.48 GiB allocated
recorded 1615 events
wrote ` + trace + `

the recording replayed on a fresh 2.00 GiB device:
  settings                    OOMs  peak reserved  peak allocated
  default                        1       1.96 GiB        1.55 GiB
  expandable_segments:True       0       1.66 GiB        1.54 GiB
  max_split_size_mb:64           0       2.00 GiB        1.55 GiB
  roundup_power2_divisions:4     0       1.94 GiB        1.56 GiB

expandable_segments:True would have avoided the OOM (set it in SUBLET_ALLOC_CONF)
max_split_size_mb:64 would have avoided the OOM (set it in SUBLET_ALLOC_CONF)
roundup_power2_divisions:4 would have avoided the OOM (set it in SUBLET_ALLOC_CONF)
`
	assert.Equal(t, want, out.String())
	events, err := replay.ReadFile(trace)
	require.NoError(t, err)
	assert.Len(t, events, 1615)

	out.Reset()
	require.NoError(t, run([]string{"-capacity", "3221225472"}, &out))
	assert.Contains(t, out.String(), "  finished: peak reserved 2.12 GiB\n")
	assert.Contains(t, out.String(), "no OOM to avoid")
	_, err = os.Stat(trace)
	require.NoError(t, err)
}

// A capacity of 0 ran on sim's default 139.80 GiB and said "a 0 B device"; positional
// arguments were ignored.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-capacity", "0"}, {"-capacity", "-1"}, {"-requests", "0"}, {"-steps", "0"}, {"extra"}, {"-nosuchflag"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(args, &out), "%v", args)
		assert.NotContains(t, out.String(), "workload:", "%v: nothing runs", args)
	}
}
