package alloc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fill(v int) [RoundupIntervals]int {
	var d [RoundupIntervals]int
	for i := range d {
		d[i] = v
	}
	return d
}

func TestParseConfigValues(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Config
	}{
		{"", Config{}},
		{"   ", Config{}},
		{"max_split_size_mb:20", Config{MaxSplitSize: 20 * MiB}},
		{"max_split_size_mb:512,max_non_split_rounding_mb:64", Config{MaxSplitSize: 512 * MiB, MaxNonSplitRounding: 64 * MiB}},
		{"garbage_collection_threshold:0.6", Config{GarbageCollectionThreshold: 0.6}},
		{"expandable_segments:True", Config{ExpandableSegments: true}},
		{"expandable_segments:False", Config{}},
		{" expandable_segments : True , max_split_size_mb : 1 00 ", Config{ExpandableSegments: true, MaxSplitSize: 100 * MiB}},
		{"roundup_power2_divisions:4", Config{RoundupPower2Divisions: fill(4)}},
		{"roundup_power2_divisions:1", Config{RoundupPower2Divisions: fill(1)}},
		{"per_process_memory_fraction:0.5", Config{PerProcessMemoryFraction: 0.5}},
		{"per_process_memory_fraction:1", Config{PerProcessMemoryFraction: 1}},
		{"backend:native", Config{}},
		{"max_split_size_mb:30,max_split_size_mb:40", Config{MaxSplitSize: 40 * MiB}},
		{"expandable_segments:True,", Config{ExpandableSegments: true}},
		{"max_split_size_mb:99999999999999999", Config{MaxSplitSize: maxSizeMiB * MiB}},
		{"pinned_use_cuda_host_register:True,pinned_num_register_threads:8,pinned_use_background_threads:True," +
			"pinned_reserve_segment_size_mb:64,pinned_max_round_threshold_mb:16,pinned_max_cached_size_mb:32,pinned_free_catch_all:True",
			Config{Pinned: PinnedConfig{UseHostRegister: true, NumRegisterThreads: 8, UseBackgroundThreads: true,
				ReserveSegmentSize: 64 * MiB, MaxRoundThreshold: 16 * MiB, MaxCachedSize: 32 * MiB, FreeCatchAll: true}}},
		{"pinned_use_hip_host_register:True", Config{Pinned: PinnedConfig{UseHostRegister: true}}},
	} {
		got, err := ParseConfig(c.in)
		require.NoError(t, err, "%q", c.in)
		assert.Equal(t, c.want, got, "%q", c.in)
	}
}

// The list form, with the examples of PyTorch's AllocatorConfig_test.
func TestParseConfigDivisionsList(t *testing.T) {
	c, err := ParseConfig("roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]")
	require.NoError(t, err)
	d := c.RoundupPower2Divisions
	at := func(mib int64) int { return d[divisionsIndex(mib*MiB)] }
	assert.Equal(t, 8, at(1))
	assert.Equal(t, 8, at(32))
	assert.Equal(t, 8, at(64))
	assert.Equal(t, 2, at(128))
	assert.Equal(t, 4, at(256))
	assert.Equal(t, 2, at(512))
	assert.Equal(t, 4, at(1024))
	assert.Equal(t, 1, at(2048))
	assert.Equal(t, 1, at(4096))
	assert.Equal(t, 1, at(64*1024))
	assert.Equal(t, [RoundupIntervals]int{8, 8, 8, 8, 8, 8, 8, 2, 4, 2, 4, 1, 1, 1, 1, 1}, d)

	c, err = ParseConfig("roundup_power2_divisions:[128:8,256:16,512:1,2048:8,>:2]")
	require.NoError(t, err)
	d = c.RoundupPower2Divisions
	assert.Equal(t, [RoundupIntervals]int{8, 8, 8, 8, 8, 8, 8, 8, 16, 1, 0, 8, 2, 2, 2, 2}, d)
	assert.Equal(t, 0, d[divisionsIndex(1024*MiB)], "1024 MiB is between keys: it keeps 0")

	c, err = ParseConfig("roundup_power2_divisions:[>:4]")
	require.NoError(t, err)
	assert.Equal(t, [RoundupIntervals]int{0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, c.RoundupPower2Divisions,
		"'>' fills the intervals after the last key; with no key that is index 0's successors")

	c, err = ParseConfig("roundup_power2_divisions:[1:2, 65536:4]")
	require.NoError(t, err)
	assert.Equal(t, 2, c.RoundupPower2Divisions[0])
	assert.Equal(t, 4, c.RoundupPower2Divisions[15], "keys beyond 32 GiB clamp to the last interval")

	c, err = ParseConfig("roundup_power2_divisions:[]")
	require.NoError(t, err)
	assert.Equal(t, Config{}, c)
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct {
		in, key string
		off     int
		msg     string
	}{
		{"max_split_size_mb:19", "max_split_size_mb", 18, "must be >= 20"},
		{"max_non_split_rounding_mb:10", "max_non_split_rounding_mb", 26, "must be >= 20"},
		{"max_split_size_mb:abc", "max_split_size_mb", 18, "integer"},
		{"max_split_size_mb:-5", "max_split_size_mb", 18, "integer"},
		{"max_split_size_mb:20abc", "max_split_size_mb", 18, "integer"},
		{"max_split_size_mb", "max_split_size_mb", 17, "expected ':'"},
		{"max_split_size_mb:", "max_split_size_mb", 18, "ends"},
		{"max_split_size_mb 20", "max_split_size_mb20", 20, "expected ':'"},
		{"expandable_segments:true", "expandable_segments", 20, "'True' or 'False'"},
		{"expandable_segments:1", "expandable_segments", 20, "'True' or 'False'"},
		{"garbage_collection_threshold:1.0", "garbage_collection_threshold", 29, "(0.0, 1.0)"},
		{"garbage_collection_threshold:0", "garbage_collection_threshold", 29, "(0.0, 1.0)"},
		{"garbage_collection_threshold:x", "garbage_collection_threshold", 29, "number"},
		{"roundup_power2_divisions:3", "roundup_power2_divisions", 25, "power of 2"},
		{"roundup_power2_divisions:0", "roundup_power2_divisions", 25, "power of 2"},
		{"roundup_power2_divisions:[64:3]", "roundup_power2_divisions", 29, "power of 2 or 0"},
		{"roundup_power2_divisions:[48:4]", "roundup_power2_divisions", 26, "intervals have to be powers of 2"},
		{"roundup_power2_divisions:[64:4", "roundup_power2_divisions", 30, "',' or ']'"},
		{"roundup_power2_divisions:[64:4;128:2]", "roundup_power2_divisions", 29, "integer"},
		{"roundup_power2_divisions:[64:4 128:2]", "roundup_power2_divisions", 29, "power of 2 or 0"},
		{"roundup_power2_divisions:[64]", "roundup_power2_divisions", 28, "expected ':'"},
		{"per_process_memory_fraction:1.5", "per_process_memory_fraction", 28, "[0.0, 1.0]"},
		{"per_process_memory_fraction:0", "per_process_memory_fraction", 28, "not supported"},
		{"pinned_num_register_threads:3", "pinned_num_register_threads", 28, "power of 2"},
		{"pinned_num_register_threads:256", "pinned_num_register_threads", 28, "<= 128"},
		{"pinned_reserve_segment_size_mb:0", "pinned_reserve_segment_size_mb", 31, ">= 1"},
		{"expandable_segments:True max_split_size_mb:40", "expandable_segments", 20, "'True' or 'False'"},
		{"expandable_segments:True:max_split_size_mb:40", "expandable_segments", 24, "expected ','"},
		{"max_split_size_mb:40,,", "", 21, "expected a key"},
		{"bogus_key:1", "bogus_key", 0, "unrecognized key 'bogus_key'"},
		{"max_split_size_mb:40,Expandable_segments:True", "Expandable_segments", 21, "unrecognized key"},
		{"release_lock_on_cudamalloc:True", "release_lock_on_cudamalloc", 0, "not supported"},
		{"backend:cudaMallocAsync", "backend", 8, "not supported"},
		{"backend:", "backend", 8, "expected a backend name but the string ends"},
		{"garbage_collection_threshold:", "garbage_collection_threshold", 29, "expected a number but the string ends"},
		{"expandable_segments:", "expandable_segments", 20, "expected True or False but the string ends"},
		{"expandable_segments:,", "expandable_segments", 20, "but got ','"},
		{"roundup_power2_divisions:", "roundup_power2_divisions", 25, "the string ends"},
		{"roundup_power2_divisions:x", "roundup_power2_divisions", 25, "integer but got 'x'"},
		{"roundup_power2_divisions:[", "roundup_power2_divisions", 26, "expected an interval or ']' but the string ends"},
		{"roundup_power2_divisions:[abc:4]", "roundup_power2_divisions", 26, "integer but got 'abc'"},
		{"roundup_power2_divisions:[64:4:128:2]", "roundup_power2_divisions", 30, "expected ',' but got ':'"},
		{"max_split_size_mb:,expandable_segments:True", "max_split_size_mb", 18, "integer but got ','"},
		{",max_split_size_mb:40", "", 0, "expected a key but got ','"},
	} {
		_, err := ParseConfig(c.in)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%q: want a *ConfigError, got %v", c.in, err)
		assert.Equal(t, c.key, ce.Key, "%q", c.in)
		assert.Equal(t, c.off, ce.Offset, "%q: %v", c.in, err)
		assert.Contains(t, err.Error(), c.msg, "%q", c.in)
		assert.Contains(t, err.Error(), "byte", "%q", c.in)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(ConfigEnv, "max_split_size_mb:64")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, Config{MaxSplitSize: 64 * MiB}, c)
	t.Setenv(ConfigEnv, "nope:1")
	_, err = ConfigFromEnv()
	require.Error(t, err)
}

func TestNewValidatesConfigValue(t *testing.T) {
	d := newSim(t, 0)
	for _, c := range []Config{
		{MaxSplitSize: 10 * MiB},
		{MaxNonSplitRounding: 1},
		{RoundupPower2Divisions: [RoundupIntervals]int{3}},
		{RoundupPower2Divisions: [RoundupIntervals]int{-2}},
		{GarbageCollectionThreshold: 1},
		{PerProcessMemoryFraction: 2},
	} {
		_, err := New(d, c)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, "%+v", c)
		assert.Equal(t, -1, ce.Offset)
	}
}

func TestPinnedConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg PinnedConfig
		key string
	}{
		{PinnedConfig{NumRegisterThreads: 3}, "Pinned.NumRegisterThreads"},
		{PinnedConfig{NumRegisterThreads: 256}, "Pinned.NumRegisterThreads"},
		{PinnedConfig{NumRegisterThreads: -1 << 63}, "Pinned.NumRegisterThreads"},
		{PinnedConfig{ReserveSegmentSize: -1}, "Pinned.ReserveSegmentSize"},
		{PinnedConfig{MaxRoundThreshold: -1}, "Pinned.MaxRoundThreshold"},
		{PinnedConfig{MaxCachedSize: -1}, "Pinned.MaxCachedSize"},
	} {
		err := c.cfg.Validate()
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, "%+v", c.cfg)
		assert.Equal(t, c.key, ce.Key)
		assert.Equal(t, -1, ce.Offset)
		// alloc.New checks the pinned part of a Config value too.
		_, err = New(newSim(t, 0), Config{Pinned: c.cfg})
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, c.key, ce.Key)
	}
	for _, c := range []PinnedConfig{
		{},
		{NumRegisterThreads: 1, UseHostRegister: true},
		{NumRegisterThreads: 128, UseHostRegister: true},
		{ReserveSegmentSize: 4096, MaxRoundThreshold: 1, MaxCachedSize: 1},
	} {
		require.NoError(t, c.Validate(), "%+v", c)
	}
}
