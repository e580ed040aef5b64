package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The service runs its requests, then a scrape over loopback reads its memory.
func TestScrapeOverLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-requests", "50"}, &out, func(a string) { addr <- a })
	}()
	var at string
	select {
	case at = <-addr:
	case err := <-done:
		t.Fatalf("run ended before serving: %v\n%s", err, out.String())
	}
	resp, err := http.Get("http://" + at + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	metrics := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, value, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "sublet_") {
			metrics[name] = value
		}
	}
	// The weights stay: 512 MiB; the largest request (batch 8) reserved its 20 MiB
	// segments beside them and the cache keeps them.
	for name, want := range map[string]string{
		`sublet_allocated_bytes_all_current{device="sim"}`:      "5.36870912e+08",
		`sublet_num_ooms{device="sim"}`:                         "0",
		`sublet_device_total_bytes{device="sim"}`:               "8.589934592e+09",
		`sublet_inactive_split_bytes_all_current{device="sim"}`: "0",
		`sublet_reserved_bytes_all_current{device="sim"}`:       "7.19323136e+08",
		`sublet_reserved_unallocated_bytes{device="sim"}`:       "1.82452224e+08",
		`sublet_segment_all_current{device="sim"}`:              "10",
	} {
		assert.Equal(t, want, metrics[name], name)
	}
	for _, name := range []string{`sublet_reserved_bytes_all_current{device="sim"}`, `sublet_reserved_unallocated_bytes{device="sim"}`,
		`sublet_fragmentation_ratio{device="sim"}`, `sublet_device_free_bytes{device="sim"}`, `sublet_num_device_alloc{device="sim"}`} {
		assert.Contains(t, metrics, name)
	}
	assert.Contains(t, string(body), "# TYPE sublet_num_ooms counter")
	assert.Contains(t, string(body), "# TYPE sublet_allocated_bytes_all_current gauge")
	assert.Contains(t, out.String(), "served 50 requests: allocated 536870912 bytes (the weights), reserved 719323136, peak reserved 719323136, 10 segments, 0 OOMs\n")
}

// A capacity of 0 served on sim's default 139.80 GiB; positional arguments were ignored.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-capacity", "0"}, {"-capacity", "-1"}, {"-requests", "-1"}, {"extra"}, {"-nosuchflag"}} {
		var out bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), &out, func(string) { cancel() })
		cancel()
		assert.Error(t, err, "%v", args)
		assert.NotErrorIs(t, err, context.Canceled, "%v: refused, not served until stopped", args)
		assert.NotContains(t, out.String(), "serving", "%v: nothing is served", args)
	}
}
