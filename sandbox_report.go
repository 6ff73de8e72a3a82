// sandbox_report.go owns the sandbox in force: checking the operator's
// sandboxConfig against the kernel's Landlock support when acp or serve
// starts, and saying what confines tools wherever acpguard reports itself:
// serve's GET /capabilities and /metrics, the ACP initialize result, the
// startup log lines, and the flags serve gives its children.
package main

import (
	"fmt"
	"log/slog"
)

// sandboxNetworkABI is the first Landlock ABI that governs TCP bind and
// connect (LANDLOCK_ACCESS_NET_BIND_TCP, LANDLOCK_ACCESS_NET_CONNECT_TCP),
// which --sandbox-network none needs.
const sandboxNetworkABI = 4

// metaSandbox names the sandbox report in the ACP initialize result's
// agentCapabilities._meta.
const metaSandbox = "acpguard/sandbox"

// sandboxInForce is the sandbox a process confines its tools with, after
// the kernel check: Config is off when the kernel could not give what a
// default asked for.
type sandboxInForce struct {
	Config sandboxConfig
	ABI    int // the kernel's Landlock ABI version; 0 without Landlock
}

// startSandbox checks cfg against the kernel's answer to probeLandlock.
// Without Landlock a workspace profile the operator asked for (cfg.Explicit)
// is an error (exit 1) naming that answer; a default one turns off with one
// warning on log. --sandbox-network none asked for on a kernel older than
// ABI 4 is an error too: never weaker than what was asked.
func startSandbox(cfg sandboxConfig, log *slog.Logger) (sandboxInForce, error) {
	abi, probeErr := probeLandlock()
	if probeErr == nil && abi < 1 {
		probeErr = fmt.Errorf("landlock_create_ruleset version probe: ABI version %d", abi)
	}
	if probeErr != nil {
		abi = 0
	}
	if !cfg.on() {
		return sandboxInForce{Config: sandboxConfig{Profile: sandboxOff, Explicit: cfg.Explicit}, ABI: abi}, nil
	}
	if probeErr != nil {
		if cfg.Explicit {
			return sandboxInForce{}, fmt.Errorf("confine tools with --%s %s: the kernel has no Landlock (%v); enable it (CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot parameter) or pass --%s %s", flagSandbox, sandboxWorkspace, probeErr, flagSandbox, sandboxOff)
		}
		log.Warn("sandbox off: the kernel has no Landlock, so tools, hooks and MCP servers run unconfined; enable Landlock, or pass --sandbox off to accept this without a warning", "probe", probeErr.Error())
		return sandboxInForce{Config: sandboxConfig{Profile: sandboxOff}}, nil
	}
	if cfg.Network == sandboxNone && abi < sandboxNetworkABI {
		return sandboxInForce{}, fmt.Errorf("confine tools with --%s %s: the kernel's Landlock ABI is %d and denying TCP bind and connect needs ABI %d (Linux 6.7); pass --%s %s or run on a newer kernel", flagSandboxNetwork, sandboxNone, abi, sandboxNetworkABI, flagSandboxNetwork, sandboxAll)
	}
	return sandboxInForce{Config: cfg, ABI: abi}, nil
}

// sandboxReport is the sandbox in force as /capabilities and the ACP
// initialize result show it.
type sandboxReport struct {
	Profile     string `json:"profile"`     // "workspace" or "off"
	LandlockABI int    `json:"landlockAbi"` // the kernel's; 0 without Landlock
	Network     string `json:"network"`     // "all" or "none"
	Unix        string `json:"unix"`        // "all" or "none"
}

func (s sandboxInForce) report() sandboxReport {
	r := sandboxReport{Profile: sandboxOff, LandlockABI: s.ABI, Network: sandboxAll, Unix: sandboxAll}
	if s.Config.on() {
		r.Profile = sandboxWorkspace
		if s.Config.Network == sandboxNone {
			r.Network = sandboxNone
		}
		if s.Config.Unix == sandboxNone {
			r.Unix = sandboxNone
		}
	}
	return r
}

// reported says whether /capabilities and the initialize result carry the
// report: always in required mode or with the sandbox on, never in off
// mode with the sandbox off, whose answers stay as they were.
func (s sandboxInForce) reported(guarded bool) bool { return guarded || s.Config.on() }

// logAttr is the report as one group of the startup log line.
func (s sandboxInForce) logAttr() slog.Attr {
	r := s.report()
	return slog.Group("sandbox", "profile", r.Profile, "landlockAbi", r.LandlockABI, "network", r.Network, "unix", r.Unix)
}

// childArgs are the flags that give an ACP child the sandbox in force in
// serve, so that the child confines exactly as serve reports. The profile is
// always given: a managed child's own default is not serve's to assume.
// The child reads the settings file again: where serve has no read or
// write list, the child takes the list the file has when the child starts,
// which only an edit of the operator's own file can change.
func (s sandboxInForce) childArgs() []string {
	c := s.Config
	if !c.on() {
		return []string{"--" + flagSandbox, sandboxOff}
	}
	args := []string{"--" + flagSandbox, sandboxWorkspace}
	for _, p := range c.Read {
		args = append(args, "--"+flagSandboxRead, p)
	}
	for _, p := range c.Write {
		args = append(args, "--"+flagSandboxWrite, p)
	}
	// Network and Unix are always given, so a settings file edited after
	// serve started cannot change them for a later child.
	r := s.report()
	return append(args, "--"+flagSandboxNetwork, r.Network, "--"+flagSandboxUnix, r.Unix)
}

// writeSandboxMetrics writes serve's sandbox gauges.
func writeSandboxMetrics(b *promWriter, s sandboxInForce) {
	enabled := int64(0)
	if s.Config.on() {
		enabled = 1
	}
	b.single("acpguard_serve_sandbox_enabled", "gauge", "1 when the children confine tools, hooks and MCP servers with the workspace sandbox, else 0.", enabled)
	b.single("acpguard_serve_sandbox_landlock_abi", "gauge", "The kernel's Landlock ABI version, 0 without Landlock.", int64(s.ABI))
}
