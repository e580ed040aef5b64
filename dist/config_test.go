package dist

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigFromEnvReadsTorchrunsVariables(t *testing.T) {
	c, err := configFrom(envOf(map[string]string{
		"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
		"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "SUBLET_DIST_TIMEOUT": "90s",
	}))
	require.NoError(t, err)
	assert.Equal(t, Config{Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, MasterAddr: "node0", MasterPort: 29500, Timeout: 90 * time.Second}, c)

	c, err = configFrom(envOf(map[string]string{"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}))
	require.NoError(t, err)
	assert.Equal(t, 2, c.LocalRank, "LOCAL_RANK defaults to RANK (one machine)")
	assert.Equal(t, 3, c.LocalWorldSize)
	assert.Equal(t, DefaultTimeout, c.timeout())

	c, err = configFrom(envOf(map[string]string{"RANK": "0", "WORLD_SIZE": "1"}))
	require.NoError(t, err, "a world of one needs no master address")
	assert.Equal(t, 1, c.WorldSize)
}

func TestConfigFromEnvNamesTheBadVariable(t *testing.T) {
	good := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
	for _, c := range []struct {
		key, value, want string
	}{
		{"RANK", "", `RANK="": not set; start the program with ` + "`sublet run"},
		{"WORLD_SIZE", "", `WORLD_SIZE="": not set`},
		{"RANK", "one", `RANK="one": not an integer`},
		{"RANK", "2", `RANK="2": the rank must be in [0, 2) for WORLD_SIZE=2`},
		{"RANK", "-1", `RANK="-1": the rank must be in [0, 2)`},
		{"WORLD_SIZE", "0", `WORLD_SIZE="0": the world size must be at least 1`},
		{"MASTER_PORT", "", `MASTER_PORT="": not set`},
		{"MASTER_PORT", "70000", `MASTER_PORT="70000": the port must be in [1, 65535]`},
		{"MASTER_ADDR", "", `MASTER_ADDR="": not set: the host rank 0 listens on`},
		{"LOCAL_RANK", "5", `LOCAL_RANK="5": the local rank must be in [0, 2)`},
		{"LOCAL_WORLD_SIZE", "3", `LOCAL_WORLD_SIZE="3": must be in [1, WORLD_SIZE=2]`},
		{"SUBLET_DIST_TIMEOUT", "10", `SUBLET_DIST_TIMEOUT="10": not a Go duration`},
	} {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		if c.value == "" {
			delete(env, c.key)
		} else {
			env[c.key] = c.value
		}
		_, err := configFrom(envOf(env))
		require.Error(t, err, c.key)
		assert.ErrorIs(t, err, ErrConfig, c.key)
		assert.Contains(t, err.Error(), c.want)
	}
	err := Config{WorldSize: 1, Timeout: -time.Second}.Validate()
	assert.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "the timeout must be positive")
}

func TestLaunchedFollowsTheEnvironment(t *testing.T) {
	t.Setenv(EnvRank, "0")
	t.Setenv(EnvWorldSize, "1")
	assert.True(t, Launched())
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, 1, c.WorldSize)
}

func TestInitFromEnvNamesAMissingVariable(t *testing.T) {
	t.Setenv(EnvWorldSize, "2")
	t.Setenv(EnvRank, "1")
	t.Setenv(EnvMasterAddr, "127.0.0.1")
	t.Setenv(EnvMasterPort, "")
	_, err := InitFromEnv()
	assert.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), `MASTER_PORT="": not set`)
	t.Setenv(EnvWorldSize, "1")
	t.Setenv(EnvRank, "0")
	g, err := InitFromEnv()
	require.NoError(t, err)
	assert.Equal(t, 1, g.WorldSize())
	require.NoError(t, g.Close())
}
