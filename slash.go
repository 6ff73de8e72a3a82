// slash.go owns the slash commands the agent runs and the names a flag may
// give; the one rule for what prompt text is one, which serve (refusing it
// in required mode) and the ACP child (running it) share, is slashCommand
// in channel_acp.go.
package main

import (
	"strings"
)

// Slash commands: prompt text that slashCommand says is one. The set is
// small on purpose; none of them runs a tool.
const (
	slashHelp  = "help"
	slashTools = "tools"
)

// slashCommands are the commands and what /help says of each, in its order.
var slashCommands = []struct{ name, what string }{
	{slashHelp, "this text"},
	{slashTools, "the tools the model may call"},
}

// /fork starts a delegated agent: no flag can open it (DESIGN.md §10).
const forkSlashCommand = "fork"

// validCommandName is the name a slash command flag may give: letters,
// digits, '-', '_', '.' and ':'.
func validCommandName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return false
		}
	}
	return true
}
