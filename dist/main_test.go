package dist

import (
	"fmt"
	"os"
	"testing"
)

// helperEnv names the helper a re-executed test binary runs instead of the tests:
// the multi-process tests start this binary as their ranks (with Launch).
const helperEnv = "SUBLET_DIST_TEST_HELPER"

// helpers are what a re-executed test binary can be asked to run; each returns the
// process's exit status.
var helpers = map[string]func() int{}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		h, ok := helpers[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no test helper %q\n", name)
			os.Exit(2)
		}
		os.Exit(h())
	}
	os.Exit(m.Run())
}
