// reaper.go owns the last line of "No orphan processes, ever": every process
// an ACP child starts (tools, hooks, MCP servers) runs in its own process
// group, so a child killed with SIGKILL cannot end them itself. serve marks
// each child's environment, which every descendant inherits, and ends every
// process group that still carries the mark when the child is gone.
package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// envChannelMark names the variable serve sets, with a fresh random value,
// in each ACP child's environment. It is not secret: it only labels the
// processes that belong to one child.
const envChannelMark = "ACPGUARD_CHANNEL"

// killMarked sends SIGKILL to the process group of every process whose
// environment carries envChannelMark=value, and to the process itself, and
// returns how many it found. A process that cleared its environment and left
// the group escapes; the group kill still ends whatever stayed in it.
func killMarked(value string) int {
	mark := []byte(envChannelMark + "=" + value)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !hasEnvEntry(env, mark) {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid != syscall.Getpgrp() {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
		syscall.Kill(pid, syscall.SIGKILL)
		n++
	}
	return n
}

// hasEnvEntry reports whether the NUL-separated environ holds entry exactly.
func hasEnvEntry(environ, entry []byte) bool {
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}
