// tools.go owns the built-in tools: their argument schemas, normalization
// against the session cwd, and their executors.
package main

// processSet tracks the background processes a session started, so they end with it.
// STUB: owned by the guard/tools helper.
type processSet struct{}

// killAll ends every tracked process group.
func (p *processSet) killAll() {}
