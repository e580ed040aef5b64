//go:build unix

package dist

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup makes the process the leader of a new process group, so that a
// signal reaches what it starts too (`go run` starts the program as its child), and a
// terminal's Ctrl-C reaches it once, through Launch, not twice.
func ownProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signal sends s to the process's group.
func (p *process) signal(s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		return
	}
	_ = p.cmd.Process.Signal(s)
}

func (p *process) terminate() { p.signal(syscall.SIGTERM) }
func (p *process) kill()      { p.signal(syscall.SIGKILL) }
