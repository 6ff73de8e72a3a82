// envscrub.go owns the secrets in the environment: it captures and unsets
// them at start, hides the start environment from other processes, and is
// the one builder of every child process environment. It is also the one
// source of random ids, nonces and tokens.
package main

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// The tokens: read into memory and unset at start, in every subcommand and
// mode (DESIGN.md §4).
const (
	envGuardToken  = "QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN"
	envServerToken = "QWEN_SERVER_TOKEN"
)

// The private markers (DESIGN.md §4): serve sets only the required-v1
// marker, which is not secret: an environment is readable through /proc by
// processes of the same user until its owner hides itself. A child trusts its
// parent because their channel is a socket pair only serve can write to
// (channel.go). A capability in the environment is still read and removed at
// start, and never passed on.
const (
	envPrivateCapability = "QWEN_CODE_PRIVATE_ACP_CAPABILITY"
	envPrivateGuard      = "QWEN_CODE_PRIVATE_EXTERNAL_TOOL_GUARD"
	privateGuardMarker   = "required-v1"
)

// The model key never reaches a child (DESIGN.md §4): serve's children call
// the model through serve (serve_model.go).
const envModelKey = "OPENAI_API_KEY"

// The rest of the OpenAI-compatible client's environment, named as in Qwen
// Code: the service's base URL and the model's name. They are here with the
// key because the .env files may set them (settings_dotenv.go).
const (
	envModelBaseURL = "OPENAI_BASE_URL"
	envModelName    = "OPENAI_MODEL"
)

// Removed from every child environment: the secrets, the markers and the
// loader variables (and every BASH_FUNC_*).
var removedEnvNames = [...]string{
	envGuardToken, envServerToken, envPrivateCapability, envPrivateGuard, envModelKey,
	"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV",
}

// hideEnviron makes this process not dumpable. Unsetenv leaves the start
// environment, the token in it, readable in /proc/<pid>/environ by any
// process of the same user, a tool this process started included; a process
// that is not dumpable keeps its /proc files to root and refuses ptrace.
// The state read back is logged, so an operator can see it took.
func hideEnviron(log *slog.Logger) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		return fmt.Errorf("hide the start environment: prctl PR_SET_DUMPABLE: %w", e)
	}
	dumpable, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
	log.Debug("start environment hidden from other processes", "dumpable", dumpable)
	return nil
}

// removedEnvPrefix names exported bash functions, which bash imports as code.
const removedEnvPrefix = "BASH_FUNC_"

// procEnv holds what captureEnv took out of the process environment at start.
type procEnv struct {
	guardToken        string // QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN, raw
	guardTokenSet     bool
	serverToken       string // QWEN_SERVER_TOKEN, raw
	serverTokenSet    bool
	privateCapability string // QWEN_CODE_PRIVATE_ACP_CAPABILITY: removed, never used
	privateGuard      string // QWEN_CODE_PRIVATE_EXTERNAL_TOOL_GUARD
	modelKey          string // OPENAI_API_KEY
	modelKeySet       bool
	snapshot          []string

	// hidden holds the variables settings name as secrets (an http hook's
	// allowedEnvVars), set by hideSecrets: read only through secret, never
	// in a child environment. newProcEnv makes it.
	hidden *envSecrets
}

// envSecrets are the hidden variables by name, with their values.
type envSecrets struct {
	mu sync.Mutex
	m  map[string]string
}

// hideSecrets takes the named variables out of the process environment,
// of every child environment and of the settings' $VAR expansion, for
// secret alone to read. A name hidden once stays hidden.
func (e *procEnv) hideSecrets(names ...string) {
	if e.hidden == nil {
		e.hidden = &envSecrets{} // a procEnv literal (a test's): not shared yet
	}
	h := e.hidden
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		if _, done := h.m[name]; done || name == "" {
			continue
		}
		if h.m == nil {
			h.m = map[string]string{}
		}
		h.m[name] = ""
		if i := slices.IndexFunc(e.snapshot, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }); i >= 0 {
			h.m[name] = e.snapshot[i][len(name)+1:]
		}
		os.Unsetenv(name)
	}
}

// hiddenName reports whether hideSecrets took name.
func (e *procEnv) hiddenName(name string) bool {
	if e.hidden == nil {
		return false
	}
	e.hidden.mu.Lock()
	defer e.hidden.mu.Unlock()
	_, ok := e.hidden.m[name]
	return ok
}

// hiddenNames returns the names hideSecrets took, sorted.
func (e *procEnv) hiddenNames() []string {
	if e.hidden == nil {
		return nil
	}
	e.hidden.mu.Lock()
	defer e.hidden.mu.Unlock()
	return slices.Sorted(maps.Keys(e.hidden.m))
}

// secret returns a variable hideSecrets took, and whether it was set.
func (e *procEnv) secret(name string) (string, bool) {
	if e == nil || e.hidden == nil {
		return "", false
	}
	e.hidden.mu.Lock()
	defer e.hidden.mu.Unlock()
	v, ok := e.hidden.m[name]
	return v, ok && v != ""
}

// newProcEnv takes the secrets and markers out of environ ("KEY=VALUE"
// entries) and keeps the rest, minus every removed name, as the snapshot
// children are built from. It does not touch the process environment.
// A name given twice counts once, with its first value: that is the one
// os.Getenv would have returned.
func newProcEnv(environ []string) *procEnv {
	e := &procEnv{hidden: &envSecrets{}}
	seen := make(map[string]bool, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || seen[k] {
			continue
		}
		seen[k] = true
		switch k {
		case envGuardToken:
			e.guardToken, e.guardTokenSet = v, true
		case envServerToken:
			e.serverToken, e.serverTokenSet = v, true
		case envPrivateCapability:
			e.privateCapability = v
		case envPrivateGuard:
			e.privateGuard = v
		case envModelKey:
			e.modelKey, e.modelKeySet = v, true
		}
		if !removedEnvName(k) {
			e.snapshot = append(e.snapshot, kv)
		}
	}
	return e
}

// captureEnv reads the process environment once and unsets the secrets and
// private markers, so nothing started later (goroutine, library or child)
// can read them from it.
func captureEnv() *procEnv {
	e := newProcEnv(os.Environ())
	for _, k := range []string{envGuardToken, envServerToken, envPrivateCapability, envPrivateGuard, envModelKey} {
		os.Unsetenv(k)
	}
	return e
}

// lookup returns the value of a name kept in the snapshot, "" if absent.
func (e *procEnv) lookup(name string) string {
	if e.hiddenName(name) {
		return ""
	}
	for _, kv := range e.snapshot {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// setUnset sets name to value when the environment has it unset or empty,
// as Qwen Code applies a .env file, and reports whether it did. The model
// key goes where the start's went, never into the snapshot; a removed name
// is never set.
func (e *procEnv) setUnset(name, value string) bool {
	if name == envModelKey {
		if e.modelKey != "" {
			return false
		}
		e.modelKey = value
		return true
	}
	if removedEnvName(name) {
		return false
	}
	for i, kv := range e.snapshot {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			if v != "" {
				return false
			}
			e.snapshot[i] = name + "=" + value
			return true
		}
	}
	e.snapshot = append(e.snapshot, name+"="+value)
	return true
}

func removedEnvName(k string) bool {
	for _, r := range removedEnvNames {
		if k == r {
			return true
		}
	}
	return strings.HasPrefix(k, removedEnvPrefix)
}

// childEnv returns the environment for a child: the start snapshot minus every
// removed name, plus add ("KEY=VALUE"); an add entry naming a removed variable is dropped.
func (e *procEnv) childEnv(add ...string) []string {
	return e.buildEnv(nil, add)
}

// acpChildEnv is the environment of an ACP child that serve starts: childEnv,
// plus the required-v1 marker when required. It holds no secret in either
// mode, and off mode adds nothing of its own to the scrubbed environment.
func (e *procEnv) acpChildEnv(required bool, add ...string) []string {
	var own []string
	if required {
		own = append(own, envPrivateGuard+"="+privateGuardMarker)
	}
	return e.buildEnv(own, add)
}

// buildEnv is the one builder of every child environment: the snapshot and
// add, both with removed names dropped (a procEnv literal in a test may carry
// any snapshot), then markers, which only the binary itself sets. A later entry for a key replaces an earlier one in place, so each key
// appears once and no child sees two values for a name.
func (e *procEnv) buildEnv(markers, add []string) []string {
	out := make([]string, 0, len(e.snapshot)+len(add)+len(markers))
	index := make(map[string]int, cap(out))
	put := func(kv string) {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return
		}
		if i, dup := index[k]; dup {
			out[i] = kv
			return
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	for _, list := range [][]string{e.snapshot, add} {
		for _, kv := range list {
			if k, _, _ := strings.Cut(kv, "="); !removedEnvName(k) && !e.hiddenName(k) {
				put(kv)
			}
		}
	}
	for _, kv := range markers {
		put(kv)
	}
	return out
}
