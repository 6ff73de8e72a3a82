// sandbox_config.go owns the operator's sandbox choice as one validated value:
// which profile confines the processes that tools, hooks and MCP servers
// start, what they may read and write beyond the profile's defaults, and
// whether they may use the network and Unix sockets. config_sandbox.go
// fills it from the flags and settings; sandbox.go enforces it.
package main

import (
	"fmt"
	"syscall"
)

// Sandbox profiles: --sandbox off|workspace, and Qwen Code's tools.sandbox
// (false is off, true is workspace).
const (
	sandboxOff       = "off"
	sandboxWorkspace = "workspace"
)

// --sandbox-network all|none and --sandbox-unix all|none.
const (
	sandboxAll  = "all"
	sandboxNone = "none"
)

// sandboxConfig is a validated sandbox configuration. The zero value is off.
type sandboxConfig struct {
	Profile string // sandboxOff or sandboxWorkspace
	// Explicit says the operator asked for this profile (--sandbox or the
	// operator's settings): on a kernel without Landlock an explicit
	// workspace profile is exit 1, a default one starts with a warning and
	// reports the sandbox as off.
	Explicit bool
	// Read is nil when the whole filesystem may be read and executed;
	// otherwise the only absolute paths a confined process may read and execute.
	Read []string
	// Hide are absolute paths confined processes may not read or run even
	// where Read lets them read their directory: acpguard's own secret
	// files and the operator's --sandbox-hide paths (sandbox_hide.go).
	Hide []string
	// Protect are the operator's --sandbox-protect and tools.sandboxProtect
	// paths; Private are acpguard's secret files (--sandbox-private), also
	// in Hide, whose directories are protected. Trusted are the paths
	// acpguard itself trusts for a session (trustedProtect), set by the
	// agent per session. sandbox_protect.go.
	Protect []string
	Private []string
	Trusted []protectedPath
	// Write are absolute, existing directories confined processes may also
	// write beneath, beyond the session cwd and its temp directory.
	Write []string
	// Network is sandboxAll or sandboxNone (no socket of any family but
	// AF_UNIX, by the seccomp filter, and TCP bind and connect denied by
	// Landlock); NetworkExplicit says --sandbox-network or settings named it.
	Network         string
	NetworkExplicit bool
	// Unix is sandboxAll or sandboxNone (AF_UNIX sockets refused by a
	// seccomp filter).
	Unix string
	// TempParent is the directory each session's temp directory is made
	// in, "" the system's temporary directory: serve gives each child one
	// of its own (--sandbox-temp), which it removes once the child is
	// reaped, so that a child killed with its sessions leaves none behind.
	TempParent string
}

// on reports whether processes are confined at all.
func (c sandboxConfig) on() bool { return c.Profile == sandboxWorkspace }

// Landlock's probe: landlock_create_ruleset(NULL, 0,
// LANDLOCK_CREATE_RULESET_VERSION) returns the kernel's ABI version.
const (
	sysLandlockCreateRuleset     = 444 // x86-64 and arm64 alike
	landlockCreateRulesetVersion = 1 << 0
)

// probeLandlock returns the kernel's Landlock ABI version, or the error the
// kernel answered (ENOSYS: not built in; EOPNOTSUPP: disabled at boot). It is
// a variable so that tests can play a kernel without Landlock.
var probeLandlock = func() (int, error) {
	abi, _, errno := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, landlockCreateRulesetVersion)
	if errno != 0 {
		return 0, fmt.Errorf("landlock_create_ruleset version probe: %w", errno)
	}
	return int(abi), nil
}
