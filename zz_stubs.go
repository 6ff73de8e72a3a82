package main

import "encoding/json"

// TEMPORARY: stands in for colleagues' declarations until the merge.
type toolSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage // JSON Schema of the arguments
}

func canonicalToolName(name string) (string, bool) { return name, true }

const (
	envPrivateGuard      = "QWEN_CODE_PRIVATE_EXTERNAL_TOOL_GUARD"
	envPrivateCapability = "QWEN_CODE_PRIVATE_ACP_CAPABILITY"
	privateGuardMarker   = "required-v1"
)
