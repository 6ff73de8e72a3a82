// sandbox_report.go owns the sandbox in force: checking the operator's
// sandboxConfig against the kernel's Landlock support when acp or serve
// starts, probing whether the mount stage works here (the protect mode),
// and saying what confines tools wherever acpguard reports itself:
// serve's GET /capabilities and /metrics, the ACP initialize result, the
// startup log lines, and the flags serve gives its children.
package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
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
		return sandboxInForce{Config: sandboxConfig{Profile: sandboxOff, Explicit: cfg.Explicit, TempParent: cfg.TempParent}, ABI: abi}, nil
	}
	if probeErr != nil {
		if cfg.Explicit {
			return sandboxInForce{}, fmt.Errorf("confine tools with --%s %s: the kernel has no Landlock (%v); enable it (CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot parameter) or pass --%s %s", flagSandbox, sandboxWorkspace, probeErr, flagSandbox, sandboxOff)
		}
		log.Warn("sandbox off: the kernel has no Landlock, so tools, hooks and MCP servers run unconfined; enable Landlock, or pass --sandbox off to accept this without a warning", "probe", probeErr.Error())
		return sandboxInForce{Config: sandboxConfig{Profile: sandboxOff, TempParent: cfg.TempParent}}, nil
	}
	if cfg.Network == sandboxNone && abi < sandboxNetworkABI {
		return sandboxInForce{}, fmt.Errorf("confine tools with --%s %s: the kernel's Landlock ABI is %d and denying TCP bind and connect needs ABI %d (Linux 6.7); pass --%s %s or run on a newer kernel", flagSandboxNetwork, sandboxNone, abi, sandboxNetworkABI, flagSandboxNetwork, sandboxAll)
	}
	return sandboxInForce{Config: cfg, ABI: abi}, nil
}

// sandboxReport is the sandbox in force as /capabilities and the ACP
// initialize result show it. serve's is the base its children get
// (childArgs); a session's workspace file, where it is trusted, may
// change it for that session (DESIGN.md §10).
type sandboxReport struct {
	Profile     string `json:"profile"`     // "workspace" or "off"
	LandlockABI int    `json:"landlockAbi"` // the kernel's; 0 without Landlock
	Network     string `json:"network"`     // "all" or "none"
	Unix        string `json:"unix"`        // "all" or "none"
	// Protect is how protected paths are kept from tools
	// (sandbox_protect.go): "mount-namespace", "refuse" (a session with
	// one in reach is refused) or "off" (the sandbox is off); Protected
	// lists what this process protects beyond each session's git
	// repositories ("DIR/.*" for the dot entries of DIR).
	Protect   string   `json:"protect"`
	Protected []string `json:"protected"`
}

func (s sandboxInForce) report() sandboxReport {
	r := sandboxReport{Profile: sandboxOff, LandlockABI: s.ABI, Network: sandboxAll, Unix: sandboxAll, Protect: protectOff, Protected: []string{}}
	if s.Config.on() {
		r.Profile = sandboxWorkspace
		r.Protect = protectMountNamespace
		if mountStageWorks() != nil {
			r.Protect = protectRefuse
		}
		r.Protected = s.Config.protectedList()
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
	return slog.Group("sandbox", "profile", r.Profile, "landlockAbi", r.LandlockABI, "network", r.Network, "unix", r.Unix, "protect", r.Protect)
}

// childArgs are the sandbox flags serve gives each ACP child. Each child
// resolves each session's sandbox from them over the settings of that
// session's workspace (DESIGN.md §10), so serve gives only what is the
// operator's: its own flags as given, which win over every file, as they
// would in one acp. A base network or Unix "none" is always given too,
// so that a settings file edited after serve started cannot open them for
// a later child; "all" is never given when the operator did not, so that
// a session's workspace file may still deny them for its own sessions.
// The profile is given when the operator gave it; otherwise the child's
// default is the guard mode's, as serve's is, and a session's workspace
// file may turn the sandbox on. Config is serve's report of that base.
// g nil: Config is the operator's whole, for a serve assembled without
// flags.
func (s sandboxInForce) childArgs(g *sandboxGiven) []string {
	if g == nil {
		return s.wholeArgs()
	}
	var args []string
	if g.profile != "" {
		args = append(args, "--"+flagSandbox, g.profile)
	}
	for _, p := range g.read {
		args = append(args, "--"+flagSandboxRead, p)
	}
	for _, p := range g.write {
		args = append(args, "--"+flagSandboxWrite, p)
	}
	for _, p := range g.hide {
		args = append(args, "--"+flagSandboxHide, p)
	}
	for _, p := range g.protect {
		args = append(args, "--"+flagSandboxProtect, p)
	}
	for _, p := range g.secrets {
		args = append(args, "--"+flagSandboxPrivate, p)
	}
	r := s.report()
	for _, a := range []struct{ flag, given, base string }{{flagSandboxNetwork, g.network, r.Network}, {flagSandboxUnix, g.unix, r.Unix}} {
		switch {
		case a.given != "":
			args = append(args, "--"+a.flag, a.given)
		case a.base == sandboxNone:
			args = append(args, "--"+a.flag, sandboxNone)
		}
	}
	return args
}

// wholeArgs give a child Config whole, profile, lists, network and Unix.
func (s sandboxInForce) wholeArgs() []string {
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
	for _, p := range c.Hide {
		args = append(args, "--"+flagSandboxHide, p)
	}
	for _, p := range c.Protect {
		args = append(args, "--"+flagSandboxProtect, p)
	}
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

// userServiceSockets are where, in a user's runtime directory, the user's
// service manager and session bus listen: a confined tool that may use Unix
// sockets can ask either to start a process outside the sandbox.
var userServiceSockets = []string{"bus", "systemd/private"}

// warnUserServices warns once when the sandbox lets tools use Unix sockets
// while the user's service manager listens on one: a process it starts for
// a tool runs unconfined and reads what the sandbox hides (DESIGN.md §5).
func warnUserServices(s sandboxInForce, env *procEnv, log *slog.Logger) {
	if !s.Config.on() || s.Config.Unix == sandboxNone {
		return
	}
	var dirs []string
	if d := env.lookup(envRuntimeDir); filepath.IsAbs(d) {
		dirs = append(dirs, d)
	}
	dirs = append(dirs, filepath.Join(userRuntimeDirs, strconv.Itoa(os.Geteuid())))
	for _, d := range dirs {
		for _, name := range userServiceSockets {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().Type() == fs.ModeSocket {
				log.Warn("sandbox: tools may use Unix sockets and the user's service manager listens on one, so a tool can have it start a process outside the sandbox that reads the hidden files; pass --"+flagSandboxUnix+" "+sandboxNone, "socket", p)
				return
			}
		}
	}
}

// Protection modes, as reported (sandboxReport.Protect).
const (
	protectMountNamespace = "mount-namespace" // the stage puts read-only mounts over protected paths
	protectRefuse         = "refuse"          // unavailable: a session with a protected path in reach is refused
	protectOff            = "off"             // the sandbox is off
)

// probeMountNamespace runs the stage once with a read-only mount over a
// fresh directory, as a confined start would: some systems allow the
// namespaces and refuse the mount (a user-namespace restriction of an LSM),
// so only doing it tells. nil: the stage works. A variable, so that tests
// can play a system without user namespaces.
var probeMountNamespace = func() error {
	dir, err := os.MkdirTemp("", "acpguard-probe-")
	if err != nil {
		return fmt.Errorf("make a directory to probe with: %w", err)
	}
	defer os.Remove(dir)
	cmd := exec.Command(stageExecutable)
	cmd.Env = (&procEnv{}).childEnv()
	plan, restore, err := stageCmd(cmd, []stageMount{{Path: dir, ReadOnly: true}}, false, false)
	if err != nil {
		return err
	}
	plan.Path, plan.Args, plan.Env, plan.Dir = "", nil, nil, "/"
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = startStaged(cmd, plan, -1)
	restore()
	if err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("the probe exited: %v %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

var (
	protectProbeOnce sync.Once
	protectProbeErr  error
)

// mountStageWorks probes once per process and returns the probe's answer.
func mountStageWorks() error {
	protectProbeOnce.Do(func() { protectProbeErr = probeMountNamespace() })
	return protectProbeErr
}
