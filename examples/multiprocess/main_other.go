//go:build !unix

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "multiprocess: this example needs a Unix system (it sends SIGTERM and SIGKILL and locks a file with flock)")
	os.Exit(1)
}
