package jsonkeys

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBad(t *testing.T) {
	bad, err := Bad([]byte(`{"events":1,"PeakLive":2,"final":{"allocated_bytes.all.current":0,"numOOMs":1},"rows":[{"ok_key":1,"Bad":2}],"1":3}
{"SUBLET_ALLOC_CONF":"","trailing_":1,"a..b":2}`), "SUBLET_ALLOC_CONF")
	require.NoError(t, err)
	assert.Equal(t, []string{"/PeakLive", "/final/numOOMs", "/rows[0]/Bad", "/a..b", "/trailing_"}, bad)

	bad, err = Bad([]byte(`[1, {"x_y": {"z": true}}]`))
	require.NoError(t, err)
	assert.Empty(t, bad)

	_, err = Bad([]byte(``))
	assert.EqualError(t, err, "jsonkeys: no JSON value")
	_, err = Bad([]byte(`{"a":`))
	assert.Error(t, err)
}
