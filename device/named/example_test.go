package named_test

import (
	"fmt"
	"os"

	"github.com/subletml/sublet/device/named"
)

// Devices by name: each name opens one device value per process, so everyone who asks
// for "sim" shares it and its caching allocator. A bad name says which names exist.
func Example() {
	d, _ := named.Open("sim-backed")
	again, _ := named.Open("sim-backed")
	fmt.Println(d.Name(), d.Residency(), "same value:", d == again)

	n, _ := named.Parse("cuda") // a name taken apart, for a tool that opens the device itself
	fmt.Println(n, n.Kind, n.Ordinal)

	_, err := named.Open("gpu")
	fmt.Println(err)
	// Output:
	// sim host same value: true
	// cuda:0 cuda 0
	// named: unknown device "gpu": want "cpu", "sim", "sim-backed", "cuda" or "cuda:N" (N = 0, 1, ...)
}

// Default is what a program runs on unless told otherwise: SUBLET_DEVICE when set,
// else the first GPU when one is usable, else the CPU.
func ExampleDefault() {
	old, had := os.LookupEnv(named.EnvVar)
	os.Setenv(named.EnvVar, "sim") // as if run with SUBLET_DEVICE=sim
	defer func() {
		if had {
			os.Setenv(named.EnvVar, old)
		} else {
			os.Unsetenv(named.EnvVar)
		}
	}()
	d, err := named.Default()
	fmt.Println(d.Name(), d.Residency(), err)
	// Output:
	// sim meta <nil>
}
