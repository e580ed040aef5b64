package dist

import (
	"net"
	"os"
	"strconv"
	"time"
)

// The environment torchrun and `sublet run` give every process they start.
const (
	EnvRank           = "RANK"             // this process's rank, 0 ≤ RANK < WORLD_SIZE
	EnvWorldSize      = "WORLD_SIZE"       // the number of processes
	EnvLocalRank      = "LOCAL_RANK"       // the rank among the processes of this machine (the GPU to use)
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE" // the number of processes on this machine
	EnvMasterAddr     = "MASTER_ADDR"      // the host of rank 0, where the others connect
	EnvMasterPort     = "MASTER_PORT"      // the TCP port rank 0 listens on
	// EnvTimeout is sublet's own: a Go duration ("90s", "10m") bounding the rendezvous
	// and every collective.
	EnvTimeout = "SUBLET_DIST_TIMEOUT"
)

// DefaultTimeout bounds the rendezvous and each collective when no timeout is set: ten
// minutes, PyTorch's default for NCCL process groups.
const DefaultTimeout = 10 * time.Minute

// Config is what a process needs to join a group. ConfigFromEnv reads it from the
// launcher's environment; a program that starts its ranks itself fills it in.
type Config struct {
	// Rank is this process's rank, in [0, WorldSize).
	Rank int
	// WorldSize is the number of processes in the group (1: no network is used).
	WorldSize int
	// LocalRank is the rank among the processes on this machine, in
	// [0, LocalWorldSize): the GPU a process uses is cuda:LocalRank.
	LocalRank int
	// LocalWorldSize is the number of processes on this machine (0: WorldSize).
	LocalWorldSize int
	// MasterAddr and MasterPort are where the others connect to rank 0, which listens
	// on MasterPort (see Init; unused when WorldSize is 1).
	MasterAddr string
	MasterPort int
	// Timeout bounds the rendezvous (every rank must join within it) and each
	// collective (every rank must take part within it); 0 means DefaultTimeout.
	Timeout time.Duration
}

// Launched reports whether this process was started by a launcher (`sublet run`,
// torchrun): RANK and WORLD_SIZE are set.
func Launched() bool {
	_, rank := os.LookupEnv(EnvRank)
	_, world := os.LookupEnv(EnvWorldSize)
	return rank && world
}

// ConfigFromEnv reads the launcher's environment: RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT are required (the last two only when WORLD_SIZE > 1), LOCAL_RANK and
// LOCAL_WORLD_SIZE default to RANK and WORLD_SIZE (one machine), SUBLET_DIST_TIMEOUT
// to DefaultTimeout. A missing or bad variable is an error wrapping ErrConfig that
// names it.
func ConfigFromEnv() (Config, error) { return configFrom(os.LookupEnv) }

func configFrom(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	integer := func(name string, required bool, def int, dst *int) error {
		v, ok := lookup(name)
		if !ok || v == "" {
			if required {
				return configErr(name, v, "not set; start the program with `sublet run -nproc N PROGRAM` (or torchrun), or set it")
			}
			*dst = def
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return configErr(name, v, "not an integer")
		}
		*dst = n
		return nil
	}
	if err := integer(EnvWorldSize, true, 0, &c.WorldSize); err != nil {
		return c, err
	}
	if err := integer(EnvRank, true, 0, &c.Rank); err != nil {
		return c, err
	}
	if err := integer(EnvLocalRank, false, c.Rank, &c.LocalRank); err != nil {
		return c, err
	}
	if err := integer(EnvLocalWorldSize, false, c.WorldSize, &c.LocalWorldSize); err != nil {
		return c, err
	}
	networked := c.WorldSize > 1
	c.MasterAddr, _ = lookup(EnvMasterAddr)
	if err := integer(EnvMasterPort, networked, 0, &c.MasterPort); err != nil {
		return c, err
	}
	if v, ok := lookup(EnvTimeout); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return c, configErr(EnvTimeout, v, "not a Go duration (write 90s, 10m)")
		}
		c.Timeout = d
	}
	return c, c.Validate()
}

// Validate checks the settings and names the first bad one.
func (c Config) Validate() error {
	switch {
	case c.WorldSize < 1:
		return configErr(EnvWorldSize, strconv.Itoa(c.WorldSize), "the world size must be at least 1")
	case c.Rank < 0 || c.Rank >= c.WorldSize:
		return configErr(EnvRank, strconv.Itoa(c.Rank), "the rank must be in [0, %d) for WORLD_SIZE=%d", c.WorldSize, c.WorldSize)
	case c.LocalWorldSize < 0 || c.LocalWorldSize > c.WorldSize:
		return configErr(EnvLocalWorldSize, strconv.Itoa(c.LocalWorldSize), "must be in [1, WORLD_SIZE=%d]", c.WorldSize)
	case c.LocalRank < 0 || c.LocalRank >= c.localWorldSize():
		return configErr(EnvLocalRank, strconv.Itoa(c.LocalRank), "the local rank must be in [0, %d)", c.localWorldSize())
	case c.Timeout < 0:
		return configErr(EnvTimeout, c.Timeout.String(), "the timeout must be positive (0 means the default, %v)", DefaultTimeout)
	case c.WorldSize == 1:
		return nil
	case c.MasterAddr == "":
		return configErr(EnvMasterAddr, "", "not set: the host rank 0 listens on (127.0.0.1 on one machine)")
	case c.MasterPort < 1 || c.MasterPort > 65535:
		return configErr(EnvMasterPort, strconv.Itoa(c.MasterPort), "the port must be in [1, 65535]")
	}
	return nil
}

func (c Config) localWorldSize() int {
	if c.LocalWorldSize == 0 {
		return c.WorldSize
	}
	return c.LocalWorldSize
}

func (c Config) timeout() time.Duration {
	if c.Timeout == 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func (c Config) masterAddress() string {
	return net.JoinHostPort(c.MasterAddr, strconv.Itoa(c.MasterPort))
}
