// envscrub.go owns the secrets in the environment: it captures and unsets
// them at start, and is the one builder of every child process environment.
package main

// procEnv holds what captureEnv took out of the process environment at start.
type procEnv struct {
	guardToken        string // QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN, raw
	guardTokenSet     bool
	serverToken       string // QWEN_SERVER_TOKEN, raw
	serverTokenSet    bool
	privateCapability string // QWEN_CODE_PRIVATE_ACP_CAPABILITY
	privateGuard      string // QWEN_CODE_PRIVATE_EXTERNAL_TOOL_GUARD
	snapshot          []string
}

// STUB: owned by the envscrub helper.
func newProcEnv(environ []string) *procEnv { return &procEnv{snapshot: environ} }

// STUB
func captureEnv() *procEnv { return newProcEnv(nil) }

// childEnv returns the environment for a child: the start snapshot minus every
// removed name, plus add ("KEY=VALUE"); an add entry naming a removed variable is dropped.
// STUB
func (e *procEnv) childEnv(add ...string) []string {
	return append(append([]string{}, e.snapshot...), add...)
}

// managedChildEnv is childEnv plus the two private markers of a managed ACP child.
// STUB
func (e *procEnv) managedChildEnv(capability string, add ...string) []string {
	return e.childEnv(add...)
}
