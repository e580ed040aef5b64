//go:build !unix

package dist

import (
	"os"
	"os/exec"
)

// ownProcessGroup does nothing where there are no process groups.
func ownProcessGroup(*exec.Cmd) {}

// signal sends s to the process, or kills it where signals cannot be sent (Windows).
func (p *process) signal(s os.Signal) {
	if p.cmd.Process.Signal(s) != nil {
		_ = p.cmd.Process.Kill()
	}
}

func (p *process) terminate() { p.kill() }
func (p *process) kill()      { _ = p.cmd.Process.Kill() }
